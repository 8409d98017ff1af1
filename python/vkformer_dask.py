"""vkformer on Dask: bulk translation across the workers of a Dask cluster.

Each worker process loads the model once, when it starts (a worker plugin), and
every partition of a Dask bag or dataframe of texts that the scheduler gives it
is translated by that model, in batches; the results come back partition by
partition, in input order. Only texts, results and the plugin's few options
(the model's path, the device) travel between the client, the scheduler and the
workers: never weights. Each worker reads the model from its own path (a shared
or copied folder).

    from dask.distributed import Client
    import dask.bag as db
    import vkformer_dask

    client = Client("tcp://scheduler:8786")       # workers started with VKFORMER_DEVICE=0, 1, ...
    vkformer_dask.register(client, "/models/opus-mt-en-de")    # every worker, and those that join later
    texts = db.read_text("corpus-*.txt").map(str.rstrip)
    vkformer_dask.translate_bag(texts, batch_size=32).to_textfiles("out-*.txt")

    import dask.dataframe as dd
    df = dd.read_parquet("corpus.parquet")
    df["translation"] = vkformer_dask.translate_series(df["text"])

The device of a worker: `device=` of register(), else the worker's
VKFORMER_DEVICE environment variable (one worker per GPU), else the library's
default; `devices="all"` (or a list) makes each worker run a vkformer.Pool over
several devices instead. A worker that dies is restarted by its nanny, loads the
model again, and the scheduler runs the lost partitions again (up to
distributed.scheduler.allowed-failures times; docs/scaling.md).

Needs dask and distributed (Debian 12: python3-dask, python3-distributed; for
dataframes python3-pandas) and the vkformer package on every worker (pip install ./python
or meson install: docs/python.md).
"""
import os
import threading

from distributed import WorkerPlugin, get_worker

import vkformer

__all__ = ["VkformerPlugin", "register", "translate_partition", "translate_bag", "translate_series", "worker_stats"]

DEFAULT_NAME = "vkformer"

# In each worker process: the models its plugins loaded, by plugin name, and how
# many times each name was loaded in this process.
_models = {}
_loads = {}
_models_lock = threading.Lock()


class _Loaded:
    """A model (or pool) of a worker process, the lock its task threads take turns
    on, and what it did."""

    def __init__(self, model):
        self.model = model
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.partitions = 0
        self.texts = 0
        self.batches = 0


class VkformerPlugin(WorkerPlugin):
    """Loads a model once per worker process (setup) and frees it when the worker
    closes (teardown). path: a model file or Hugging Face folder on the worker's
    filesystem. device: a device index or name (None: VKFORMER_DEVICE, else the
    library's default); devices: "all" or a list, for a vkformer.Pool of several
    devices in each worker instead. load_options: precision, attention,
    cross_attention, seed, validation, library, as vkformer.load takes them. What
    is pickled and sent to the workers is this object: the path and options."""

    def __init__(self, path, name=DEFAULT_NAME, device=None, devices=None, **load_options):
        self.path = os.fspath(path)
        self.name = name
        self.device = device
        self.devices = devices
        self.load_options = load_options

    def setup(self, worker=None):
        if self.devices is not None:
            model = vkformer.Pool(self.path, devices=self.devices, **self.load_options)
        else:
            model = vkformer.load(self.path, device=self.device, **self.load_options)
        with _models_lock:
            old = _models.pop(self.name, None)
            _models[self.name] = _Loaded(model)
            _loads[self.name] = _loads.get(self.name, 0) + 1
        if old is not None:
            old.model.close()

    def teardown(self, worker=None):
        with _models_lock:
            loaded = _models.pop(self.name, None)
        if loaded is not None:
            with loaded.lock:
                loaded.model.close()


def register(client, path, name=DEFAULT_NAME, device=None, devices=None, **load_options):
    """Registers the plugin with the client: every worker loads the model now, and
    every worker that joins later (a restarted one too) when it starts."""
    plugin = VkformerPlugin(path, name=name, device=device, devices=devices, **load_options)
    client.register_worker_plugin(plugin, name="vkformer-" + name)
    return plugin


def _loaded(name):
    with _models_lock:
        loaded = _models.get(name)
    if loaded is None:
        where = "this process"
        try:
            where = "worker " + get_worker().address
        except ValueError:
            pass
        raise RuntimeError("vkformer_dask: no model named %r on %s: call vkformer_dask.register(client, path) first"
                           % (name, where))
    return loaded


def translate_partition(texts, name=DEFAULT_NAME, batch_size=64, **translate_options):
    """Translates one partition (any iterable of str) with the worker's model, in
    batches of batch_size; a list of str in the same order. translate_options:
    max_new, beams, source_lang, target_lang, as Model.translate takes them."""
    texts = list(texts)
    loaded = _loaded(name)
    out = []
    with loaded.lock:
        if isinstance(loaded.model, vkformer.Pool):
            out = loaded.model.translate(texts, batch_size=batch_size, **translate_options) if texts else []
            loaded.batches += (len(texts) + batch_size - 1) // batch_size
        else:
            for k in range(0, len(texts), batch_size):
                out.extend(loaded.model.translate(texts[k:k + batch_size], **translate_options))
                loaded.batches += 1
        loaded.partitions += 1
        loaded.texts += len(texts)
    return out


def translate_bag(bag, name=DEFAULT_NAME, batch_size=64, **translate_options):
    """A bag of translations, partition for partition and in order, of a Dask bag
    of texts."""
    return bag.map_partitions(translate_partition, name=name, batch_size=batch_size, **translate_options)


def _translate_pandas(series, name, batch_size, translate_options):
    import pandas as pd
    return pd.Series(translate_partition(series.tolist(), name, batch_size, **translate_options), index=series.index,
                     name=series.name, dtype=object)


def translate_series(series, name=DEFAULT_NAME, batch_size=64, **translate_options):
    """The translations of a Dask dataframe's column of texts (a dask Series), with
    the same index and partitions."""
    return series.map_partitions(_translate_pandas, name, batch_size, translate_options,
                                 meta=(series.name, "object"))


def worker_stats(name=DEFAULT_NAME):
    """What this worker process's model did (for client.run): pid, loads,
    partitions, texts, batches, and the validation counts of its context(s)."""
    loaded = _loaded(name)
    with loaded.lock:
        m = loaded.model
        if isinstance(m, vkformer.Pool):
            errors, warnings = m.validation_counts()
        else:
            errors, warnings, _ = m.context.validation_counts()
        return {"pid": loaded.pid, "loads": _loads.get(name, 0), "partitions": loaded.partitions, "texts": loaded.texts,
                "batches": loaded.batches, "validation_errors": errors, "validation_warnings": warnings}
