"""python/vkformer_dask.py on a Dask LocalCluster of two worker processes (Debian's
python3-dask and python3-distributed, under /usr/bin/python3):
  - a bag of 240 held-out texts in 12 partitions: the cluster's translations equal,
    text for text and in order, those of the same partitions translated by one
    process (the same plugin loaded here); each worker process loaded the model
    once, both ran partitions, their contexts saw no validation message;
  - a dataframe column in 5 partitions: the same, with its index kept;
  - a worker that dies under a partition: its nanny restarts it, the new process
    loads the model once, the scheduler runs the lost partitions again, and the
    result is still identical;
  - a partition on a process without the model is a RuntimeError naming it.
usage: test_dask.py LIBVKFORMER.so MODEL TEXTS.tsv
"""
import logging
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import dask  # noqa: E402
import dask.bag as db  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import vkformer_dask  # noqa: E402

BATCH = 8
passed = failed = 0


def check(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL %s%s" % (what, ("\n     " + str(detail)[:3000]) if detail else ""))
        sys.stdout.flush()
    return cond


def die_once(texts, marker, batch_size):
    """The first partition to run anywhere kills its worker process; later ones translate."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return vkformer_dask.translate_partition(texts, batch_size=batch_size)
    os._exit(1)


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    lib, model, texts_path = sys.argv[1:]
    with open(texts_path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f][:240]
    texts = [r[0] for r in rows]
    options = dict(library=lib, validation=True)

    # one process: the same plugin, loaded here, over the same partitions
    bag = db.from_sequence(texts, npartitions=12)
    parts = [list(p) for p in dask.compute(*bag.to_delayed(), scheduler="sync")]
    check(len(parts) == 12 and sum(parts, []) == texts, "the bag's 12 partitions hold the texts in order")
    local = vkformer_dask.VkformerPlugin(model, **options)
    local.setup()
    want = [t for p in parts for t in vkformer_dask.translate_partition(p, batch_size=BATCH)]
    correct = sum(w == r[1] for w, r in zip(want, rows))
    check(correct >= 0.95 * len(rows), "one process: >= 95%% of the held-out lines right (%d of %d)" % (correct, len(rows)))
    pdf = pd.DataFrame({"text": texts, "n": range(len(texts))}, index=range(1000, 1000 + len(texts)))
    ddf = dd.from_pandas(pdf, npartitions=5)
    df_want = [t for i in range(ddf.npartitions)
               for t in vkformer_dask.translate_partition(ddf.get_partition(i)["text"].compute(scheduler="sync")
                                                          .tolist(), batch_size=BATCH)]
    stats_here = vkformer_dask.worker_stats()
    check(stats_here["validation_errors"] == 0 and stats_here["validation_warnings"] == 0,
          "one process: no validation message", stats_here)
    local.teardown()
    try:
        vkformer_dask.translate_partition(["two"])
        check(False, "a process without the model raises")
    except RuntimeError as e:
        check("no model named 'vkformer'" in str(e) and "register" in str(e), "a process without the model raises "
              "RuntimeError naming it", e)

    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None,
                         silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
        vkformer_dask.register(client, model, **options)
        got = vkformer_dask.translate_bag(bag, batch_size=BATCH).compute()
        check(got == want, "bag on two workers: identical to one process, in order",
              [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w][:10])
        stats = client.run(vkformer_dask.worker_stats)
        pids = {s["pid"] for s in stats.values()}
        check(len(stats) == 2 and len(pids) == 2 and os.getpid() not in pids, "two worker processes", stats)
        check(all(s["loads"] == 1 for s in stats.values()), "each worker process loaded the model once", stats)
        check(sum(s["partitions"] for s in stats.values()) == 12 and all(s["partitions"] >= 1 for s in stats.values()),
              "both workers ran partitions, 12 in all", stats)
        check(sum(s["texts"] for s in stats.values()) == len(texts), "every text translated once", stats)
        print("bag: %s" % {a: (s["partitions"], s["texts"], s["batches"]) for a, s in stats.items()})

        got_df = vkformer_dask.translate_series(ddf["text"], batch_size=BATCH).compute()
        check(got_df.tolist() == df_want and list(got_df.index) == list(pdf.index),
              "dataframe column on two workers: identical to one process, index kept",
              list(zip(got_df.tolist(), df_want))[:10])

        # a worker dies under a partition: restarted, the partition runs again
        marker = os.path.join(tmp, "died")
        got = bag.map_partitions(die_once, marker, BATCH).compute()
        check(os.path.exists(marker), "a worker was killed under a partition")
        check(got == want, "after a lost worker: identical to one process, in order",
              [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w][:10])
        client.wait_for_workers(2, timeout=120)  # the restarted worker joins again; its plugin loads the model
        after = None
        for _ in range(240):  # the plugin's setup may finish just after the worker registers
            try:
                after = client.run(vkformer_dask.worker_stats)
                break
            except RuntimeError:
                time.sleep(0.5)
        new_pids = {s["pid"] for s in after.values()}
        check(len(after) == 2 and len(new_pids - pids) == 1, "the dead worker was replaced by a new process",
              (stats, after))
        check(all(s["loads"] == 1 for s in after.values()), "the new process loaded the model once", after)
        check(all(s["validation_errors"] == 0 and s["validation_warnings"] == 0 for s in after.values()),
              "no validation message on the workers", after)

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
