#!/usr/bin/env python3
"""vkformer serve (issue 37) through real clients, on loopback only.

    test_serve.py clients VKFORMER DEMO.safetensors WHISPER_DIR HELDOUT.tsv
        curl and Python requests: LibreTranslate- and DeepL-shaped requests
        equal `vkformer translate`, transcriptions equal `vkformer transcribe`
        (speech from espeak-ng), every response format, /v1/models, /languages,
        /health, /metrics; a load test of 64 concurrent clients of mixed
        lengths (each request answered once, as the CLI's greedy output); a
        short request sent after a long one answers first; limits (401, 413,
        503 + Retry-After, 504), a client that leaves cancels its work; faults
        (slow and half-sent clients, cut uploads, a few hundred malformed or
        random requests) while the server keeps answering; SIGTERM drains and
        exits 0.
    test_serve.py clients ... --quick
        the same with 64 requests in the load test and 150 malformed ones (SwiftShader)
    test_serve.py devices VKFORMER DEMO.safetensors WHISPER_DIR HELDOUT.tsv
        --devices all on two devices (VK_ICD_FILENAMES lists both), the first one's
        scheduler failing its 5th decode step as a lost device
        (VKFORMER_SCHEDULER_FAULT=0:5): every request of 16 concurrent clients is
        still answered right, by the other device.
    test_serve.py openai VKFORMER DEMO.safetensors WHISPER_DIR HELDOUT.tsv
        the official `openai` npm client (tools/fetch_openai_js.sh): a
        transcription (plain and stream=true) equals `vkformer transcribe`;
        models.list. Exit 77 (meson SKIP) with the reason where node or the
        package is missing.
Everything is bounded: counts fixed, every wait with a timeout.
"""
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import requests

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


class Server:
    """A `vkformer serve` on 127.0.0.1 with a free port."""

    def __init__(self, vkformer, args):
        self.p = subprocess.Popen([vkformer, "serve", "--host", "127.0.0.1", "--port", "0"] + args,
                                  stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.headers = {}
        deadline = time.time() + 120
        self.port = None
        while time.time() < deadline:
            line = self.p.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.p.kill()
            raise SystemExit("the server did not start: " + "".join(self.lines))
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.port

    def _drain(self):
        for line in self.p.stderr:
            self.lines.append(line)

    def metric(self, name, **labels):
        text = requests.get(self.url + "/metrics", headers=self.headers, timeout=30).text
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{") and line.split(" ")[0] != name:
                continue
            if all('%s="%s"' % (k, v) in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self, timeout=60):
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return None


def cli_translate(vkformer, model, texts):
    out = subprocess.run([vkformer, "translate", "--model", model, "--input", "-"], input="\n".join(texts) + "\n",
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit("vkformer translate failed: " + out.stderr)
    lines = out.stdout.split("\n")[:len(texts)]
    assert len(lines) == len(texts)
    return dict(zip(texts, lines))


def cli_transcribe(vkformer, model, wav):
    out = subprocess.run([vkformer, "transcribe", "--model", model, wav], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit("vkformer transcribe failed: " + out.stderr)
    return out.stdout.strip("\n")


def speak(path, text):
    subprocess.run(["espeak-ng", "-w", path, text], check=True, timeout=60)


def texts_of(heldout, n):
    texts = []
    with open(heldout) as f:
        for line in f:
            texts.append(line.split("\t")[0].strip())
            if len(texts) == n:
                break
    # mixed lengths: one-word sources, and sources whose translations run to max_len
    texts += ["six", "twelve", "ninety"]
    texts += [" ".join(["thousand"] * k) for k in (10, 11, 12)]
    return texts


def raw_request(port, data, read=True, timeout=10):
    """Sends bytes on a fresh connection; the status code (or None when closed without one)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return None
        s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            try:
                k = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not k:
                break
            got += k
        m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
        return (int(m.group(1)), got) if m else (None, got)
    finally:
        s.close()


# ------------------------------------------------------------------ clients

def test_clients(vkformer, demo, whisper, heldout, quick=False):
    work = tempfile.mkdtemp(prefix="vkformer-serve-test.")
    texts = texts_of(heldout, 40)
    want = cli_translate(vkformer, demo, texts)
    wavs = []
    for i, words in enumerate(["three hundred forty two", "seven", "nineteen thousand"]):
        path = os.path.join(work, "speech%d.wav" % i)
        speak(path, words)
        wavs.append(path)
    want_audio = {w: cli_transcribe(vkformer, whisper, w) for w in wavs}

    sv = Server(vkformer, ["--model", demo, "--model", whisper, "--max-batch", "32"])
    url = sv.url
    try:
        # curl: one of each shape
        def curl(*args):
            out = subprocess.run(["curl", "-s", "-S", "--max-time", "60", "-w", "\n%{http_code}"] + list(args),
                                 capture_output=True, text=True, timeout=90)
            body, code = out.stdout.rsplit("\n", 1)
            return int(code), body
        code, body = curl(url + "/translate", "-H", "Content-Type: application/json",
                          "-d", json.dumps({"q": texts[0], "source": "auto", "target": "demo"}))
        check(code == 200 and json.loads(body)["translatedText"] == want[texts[0]], "curl LibreTranslate: %s" % body)
        code, body = curl(url + "/v2/translate", "--data-urlencode", "text=" + texts[1],
                          "--data-urlencode", "text=" + texts[2], "-d", "target_lang=DEMO")
        got = json.loads(body) if code == 200 else {}
        check(code == 200 and [t["text"] for t in got["translations"]] == [want[texts[1]], want[texts[2]]] and
              got["translations"][0]["detected_source_language"] == "DEMO", "curl DeepL form: %s" % body)
        code, body = curl(url + "/v1/audio/transcriptions", "-F", "file=@" + wavs[0], "-F", "model=whisper-numbers")
        check(code == 200 and json.loads(body)["text"] == want_audio[wavs[0]], "curl transcription: %s" % body)
        code, body = curl(url + "/v1/audio/translations", "-F", "file=@" + wavs[1], "-F", "model=whisper-1",
                          "-F", "response_format=text")
        check(code == 200 and body.endswith("\n"), "curl /v1/audio/translations text: %s" % body)

        # Python requests
        r = requests.post(url + "/translate", json={"q": texts[3:9], "source": "demo", "target": "demo"}, timeout=60)
        check(r.status_code == 200 and r.json()["translatedText"] == [want[t] for t in texts[3:9]],
              "requests LibreTranslate array: %s" % r.text)
        r = requests.post(url + "/translate", data={"q": texts[9], "source": "auto", "target": "demo"}, timeout=60)
        check(r.status_code == 200 and r.json()["translatedText"] == want[texts[9]] and
              r.json()["detectedLanguage"]["language"] == "demo", "requests LibreTranslate form: %s" % r.text)
        r = requests.post(url + "/translate", json={"q": texts[10], "target": "demo", "alternatives": 2}, timeout=60)
        alts = r.json().get("alternatives") if r.status_code == 200 else None
        check(r.status_code == 200 and isinstance(alts, list) and 1 <= len(alts) <= 2 and
              all(isinstance(a, str) and a != r.json()["translatedText"] for a in alts),
              "LibreTranslate alternatives (beam n-best): %s" % r.text)
        r = requests.post(url + "/v2/translate", json={"text": texts[11:15], "target_lang": "demo",
                                                       "source_lang": "DEMO"}, timeout=60)
        check(r.status_code == 200 and [t["text"] for t in r.json()["translations"]] == [want[t] for t in texts[11:15]],
              "requests DeepL JSON: %s" % r.text)
        r = requests.get(url + "/v1/models", timeout=30)
        check(r.status_code == 200 and sorted(m["id"] for m in r.json()["data"]) == ["demo", "whisper-numbers"] and
              r.json()["object"] == "list", "/v1/models: %s" % r.text)
        r = requests.get(url + "/languages", timeout=30)
        check(r.status_code == 200 and r.json() == [{"code": "demo", "name": "demo", "targets": ["demo"]}],
              "/languages: %s" % r.text)
        check(requests.get(url + "/health", timeout=30).json() == {"status": "ok"}, "/health")
        with open(wavs[2], "rb") as f:
            audio = f.read()
        r = requests.post(url + "/v1/audio/transcriptions", files={"file": ("x.wav", audio)},
                          data={"model": "whisper-numbers", "response_format": "verbose_json",
                                "timestamp_granularities[]": "segment", "temperature": "0", "language": "en"},
                          timeout=60)
        v = r.json() if r.status_code == 200 else {}
        check(r.status_code == 200 and v.get("task") == "transcribe" and isinstance(v.get("segments"), list) and
              len(v["segments"]) >= 1 and v["duration"] > 0 and "start" in v["segments"][0],
              "verbose_json: %s" % r.text)
        for fmt, head in (("srt", "1\n"), ("vtt", "WEBVTT\n")):
            r = requests.post(url + "/v1/audio/transcriptions", files={"file": ("x.wav", audio)},
                              data={"model": "whisper-numbers", "response_format": fmt}, timeout=60)
            check(r.status_code == 200 and r.text.startswith(head) and "-->" in r.text, "%s: %s" % (fmt, r.text))
        r = requests.post(url + "/v1/audio/transcriptions", files={"file": ("x.wav", audio)},
                          data={"model": "whisper-numbers", "stream": "true"}, timeout=60, stream=True)
        events = [json.loads(line[6:]) for line in r.iter_lines(decode_unicode=True) if line.startswith("data: ")]
        check(r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream") and events and
              events[-1]["type"] == "transcript.text.done" and events[-1]["text"] == want_audio[wavs[2]] and
              "".join(e["delta"] for e in events[:-1]) == events[-1]["text"], "stream=true: %s" % events)

        # errors: one JSON line, the copied API's status, the server keeps serving
        for method, path, kw, status in [
                ("post", "/translate", {"json": {"q": "one", "target": "klingon"}}, 400),
                ("post", "/translate", {"json": {"q": "one", "target": "demo", "model": "nope"}}, 404),
                ("post", "/translate", {"json": {"q": "one zillion", "target": "demo"}}, 400),
                ("post", "/translate", {"json": {"q": 5, "target": "demo"}}, 400),
                ("post", "/translate", {"data": b"{not json", "headers": {"Content-Type": "application/json"}}, 400),
                ("post", "/translate", {"data": b"q=one", "headers": {"Content-Type": "text/plain"}}, 400),
                ("post", "/v2/translate", {"json": {"text": ["one"]}}, 400),
                ("get", "/translate", {}, 405),
                ("get", "/nothing", {}, 404),
                ("post", "/v1/audio/transcriptions", {"files": {"file": ("a.wav", b"RIFF....WAVEjunk")},
                                                      "data": {"model": "whisper-numbers"}}, 400),
                ("post", "/v1/audio/transcriptions", {"files": {"file": ("a.wav", audio)},
                                                      "data": {"model": "demo"}}, 400),
                ("post", "/v1/audio/transcriptions", {"files": {"file": ("a.wav", audio)},
                                                      "data": {"model": "whisper-numbers", "language": "zz"}}, 400),
                ("post", "/v1/audio/transcriptions", {"files": {"file": ("a.wav", audio)},
                                                      "data": {"model": "whisper-numbers", "response_format": "doc"}},
                 400)]:
            r = getattr(requests, method)(url + path, timeout=60, **kw)
            ok = r.status_code == status
            try:
                msg = r.json()["error"]["message"]
                ok = ok and isinstance(msg, str) and "\n" not in msg and msg
            except (ValueError, KeyError, TypeError):
                ok = False
            check(ok, "%s %s -> %d %s (want %d with one error line)" % (method, path, r.status_code, r.text, status))

        t0 = time.time()
        load_test(sv, texts, want, per_client=1 if quick else 3)
        t1 = time.time()
        short_after_long(sv, want)
        t2 = time.time()
        faults(sv, texts, want, audio, count=150 if quick else 300)
        print("times: load %.1f s, short-after-long %.1f s, faults %.1f s" % (t1 - t0, t2 - t1, time.time() - t2),
              file=sys.stderr)

        metrics = requests.get(url + "/metrics", timeout=30).text
        for name in ("vkformer_requests_total", "vkformer_queue_depth", "vkformer_active_slots",
                     "vkformer_batch_rows_bucket", "vkformer_tokens_per_second", "vkformer_busy_seconds_total"):
            check(name in metrics, "/metrics has %s" % name)
        check(sv.metric("vkformer_requests_total", route="/translate", status="200") +
              sv.metric("vkformer_requests_total", route="/v2/translate", status="200") >= 64,
              "/metrics counts the /translate and /v2/translate answers")
        check(sv.metric("vkformer_failed_total", model="demo") == 0, "no text request failed in the scheduler")
        check(sv.metric("vkformer_encoder_passes_total", model="demo") < sv.metric("vkformer_admitted_total",
                                                                                   model="demo"),
              "arrivals were batched into fewer encoder passes than requests")

        # SIGTERM with a request in flight: answered, then exit 0
        long_texts = [" ".join(["thousand"] * 12)] * 16
        result = {}

        def inflight():
            try:
                result["r"] = requests.post(url + "/translate", json={"q": long_texts, "target": "demo"}, timeout=120)
            except requests.RequestException as e:
                result["e"] = e
        t = threading.Thread(target=inflight)
        t.start()
        deadline = time.time() + 30
        while time.time() < deadline and sv.metric("vkformer_in_flight") < 1:
            time.sleep(0.005)
        code = sv.stop()
        t.join(120)
        r = result.get("r")
        check(r is not None and r.status_code == 200 and r.json()["translatedText"] == [want[long_texts[0]]] * 16,
              "the request in flight at SIGTERM is answered: %s" % (r.text if r is not None else result))
        check(code == 0, "SIGTERM: exit 0 (got %s): %s" % (code, "".join(sv.lines[-5:])))
        try:
            socket.create_connection(("127.0.0.1", sv.port), timeout=2).close()
            refused = False
        except OSError:
            refused = True
        check(refused, "no connection accepted after SIGTERM")
    finally:
        if sv.p.poll() is None:
            sv.p.kill()
        shutil.rmtree(work, ignore_errors=True)
    limits(vkformer, demo, texts, want)
    long_recordings(vkformer)


def write_chirp(path, seconds, seed):
    """A 16 kHz 16-bit WAV of a gliding tone with noise (test_whisper's speech stand-in)."""
    import numpy as np
    import wave
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000.0
    f = 200 + 150 * np.sin(2 * np.pi * 0.3 * t)
    x = 0.3 * np.sin(2 * np.pi * np.cumsum(f) / 16000) + 0.05 * rng.standard_normal(t.size)
    with wave.open(path, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())


def long_recordings(vkformer):
    """Long-form transcription a window at a time, on a random Whisper folder with
    timestamps whose window is 2 s (tests/gen_whisper.py; a 60-s recording is 29
    windows): a short recording sent while a long one is being decoded answers
    first (the long one's windows are jobs between others' work); stream=true sends
    one transcript.text.delta per segment as its window is decoded, well before
    transcript.text.done; answers equal `vkformer transcribe --json`'s."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gen_whisper
    work = tempfile.mkdtemp(prefix="vkf-serve-windows-")
    sv = None
    try:
        folder = os.path.join(work, "ts-whisper")
        gen_whisper.make_folder(folder, layout="hub", timestamps=100, timestamp_bias=3.0, seed=21)
        clips, want = {}, {}
        for name, seconds in (("short", 1.5), ("long", 60.0)):
            clips[name] = os.path.join(work, name + ".wav")
            write_chirp(clips[name], seconds, 3)
            out = subprocess.run([vkformer, "transcribe", "--model", folder, "--json", clips[name]],
                                 capture_output=True, text=True, timeout=300)
            if out.returncode != 0:
                raise SystemExit("vkformer transcribe failed: " + out.stderr)
            want[name] = json.loads(out.stdout)
        check(want["long"]["windows"] > 20, "the long recording runs over %d windows" % want["long"]["windows"])
        sv = Server(vkformer, ["--model", folder])
        url = sv.url + "/v1/audio/transcriptions"

        def segments_of(verbose):
            return [(round(x["start"], 2), round(x["end"], 2), x["tokens"]) for x in verbose["segments"]]
        wanted = {k: [(round(x["start"], 2), round(x["end"], 2), x["ids"]) for x in v["segments"]]
                  for k, v in want.items()}
        done = {}

        def send(name):
            with open(clips[name], "rb") as f:
                r = requests.post(url, files={"file": (name + ".wav", f.read())},
                                  data={"model": "ts-whisper", "response_format": "verbose_json"}, timeout=300)
            done[name] = (time.time(), r.status_code, segments_of(r.json()) if r.status_code == 200 else r.text)
        t = threading.Thread(target=send, args=("long",))
        t.start()
        deadline = time.time() + 60
        while time.time() < deadline and sv.metric("vkformer_active_slots", model="ts-whisper") < 1:
            time.sleep(0.002)
        send("short")
        t.join(300)
        check("long" in done and done["long"][1] == 200 and done["long"][2] == wanted["long"],
              "the long recording's segments equal vkformer transcribe's: %s" % (str(done.get("long"))[:300],))
        check(done["short"][1] == 200 and done["short"][2] == wanted["short"],
              "the short recording's segments equal vkformer transcribe's: %s" % (str(done["short"])[:300],))
        check("long" in done and done["short"][0] < done["long"][0], "a short recording sent while a %d-window one "
              "is decoded answers first (short at %.3f, long at %.3f)" % (want["long"]["windows"], done["short"][0],
                                                                         done.get("long", (0,))[0]))
        # stream=true: the segments' deltas as their windows are decoded
        t0 = time.time()
        with open(clips["long"], "rb") as f:
            r = requests.post(url, files={"file": ("long.wav", f.read())},
                              data={"model": "ts-whisper", "stream": "true"}, timeout=300, stream=True)
        events = []
        for line in r.iter_lines():
            if line.startswith(b"data: "):
                events.append((time.time() - t0, json.loads(line[6:])))
        deltas = [e for e in events if e[1]["type"] == "transcript.text.delta"]
        last = events[-1] if events else (0, {})
        check(r.status_code == 200 and r.headers.get("content-type", "").startswith("text/event-stream") and
              len(deltas) == len(wanted["long"]) and last[1].get("type") == "transcript.text.done" and
              last[1].get("text") == (want["long"]["text"] or "") and len(events) == len(deltas) + 1,
              "stream=true: %d deltas (one per segment) then transcript.text.done equal to vkformer transcribe "
              "(%d segments)" % (len(deltas), len(wanted["long"])))
        check(deltas and deltas[0][0] < 0.5 * last[0], "stream=true: the first delta comes while the recording is "
              "still decoded (first at %.3f s, done at %.3f s)" % (deltas[0][0] if deltas else -1, last[0]))
    finally:
        if sv and sv.p.poll() is None:
            sv.stop()
        shutil.rmtree(work, ignore_errors=True)


def load_test(sv, texts, want, clients=64, per_client=3):
    """64 clients at once, each `per_client` requests of mixed lengths: every
    request answered once, each as the CLI's greedy output."""
    rng = random.Random(37)
    plan = [[rng.sample(texts, rng.choice([1, 1, 1, 2, 3])) for _ in range(per_client)] for _ in range(clients)]
    answers = [[None] * per_client for _ in range(clients)]
    start = threading.Barrier(clients)

    def client(i):
        s = requests.Session()
        start.wait(60)
        for k, batch in enumerate(plan[i]):
            try:
                if (i + k) % 2:
                    r = s.post(sv.url + "/translate", json={"q": batch, "target": "demo"}, timeout=120)
                    answers[i][k] = (r.status_code, r.json()["translatedText"] if r.status_code == 200 else r.text)
                else:
                    r = s.post(sv.url + "/v2/translate", json={"text": batch, "target_lang": "DEMO"}, timeout=120)
                    answers[i][k] = (r.status_code, [t["text"] for t in r.json()["translations"]]
                                     if r.status_code == 200 else r.text)
            except (requests.RequestException, ValueError) as e:
                answers[i][k] = (None, str(e))
    before = sv.metric("vkformer_answered_total", model="demo")
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    seconds = time.time() - t0
    wrong = 0
    sent = 0
    for i in range(clients):
        for k, batch in enumerate(plan[i]):
            sent += len(batch)
            status, got = answers[i][k]
            exp = [want[t] for t in batch]
            if (i + k) % 2 and len(batch) == 1:
                exp = [want[batch[0]]]
            if status != 200 or got != exp:
                wrong += 1
                if wrong < 5:
                    print("load: client %d request %d: %s %s, want %s" % (i, k, status, got, exp), file=sys.stderr)
    check(wrong == 0, "load test: %d of %d requests wrong" % (wrong, clients * per_client))
    after = sv.metric("vkformer_answered_total", model="demo")
    check(after - before == sent, "load test: %d texts sent, %d answered by the scheduler" % (sent, after - before))
    print("load test: %d clients, %d requests, %d texts in %.2f s" % (clients, clients * per_client, sent, seconds),
          file=sys.stderr)


def short_after_long(sv, want):
    """A short request sent while a long one decodes answers first."""
    long_texts = [" ".join(["thousand"] * 12)] * 16
    done = {}

    def send(name, body):
        r = requests.post(sv.url + "/translate", json=body, timeout=120)
        done[name] = (time.time(), r.status_code, r.json().get("translatedText"))
    t = threading.Thread(target=send, args=("long", {"q": long_texts, "target": "demo"}))
    t.start()
    deadline = time.time() + 30
    while time.time() < deadline and sv.metric("vkformer_active_slots", model="demo") < 16:
        time.sleep(0.002)
    send("short", {"q": "six", "target": "demo"})
    t.join(120)
    check("long" in done and done["long"][1] == 200 and done["long"][2] == [want[long_texts[0]]] * 16,
          "the long request: %s" % (done.get("long"),))
    check(done["short"][1] == 200 and done["short"][2] == want["six"], "the short request: %s" % (done["short"],))
    check("long" in done and done["short"][0] < done["long"][0], "the short request sent after the long one "
          "answers first (short at %.3f, long at %.3f)" % (done["short"][0], done.get("long", (0,))[0]))


def faults(sv, texts, want, audio, count=300):
    """Slow and half-sent clients, cut uploads and random requests; the server keeps answering."""
    port = sv.port
    held = []
    for i in range(4):  # half-sent headers, then silence
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Ty")
        held.append(s)
    for i in range(4):  # whole headers, half a body, then silence
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n"
                  b"\r\n{\"q\": \"one hun")
        held.append(s)
    r = requests.post(sv.url + "/translate", json={"q": texts[0], "target": "demo"}, timeout=60)
    check(r.status_code == 200 and r.json()["translatedText"] == want[texts[0]], "answered beside slow clients")
    # uploads cut mid-way
    boundary = b"xyzzy"
    part = (b"--" + boundary + b"\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n" +
            audio[:len(audio) // 2])
    for i in range(4):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
                  b"boundary=" + boundary + b"\r\nContent-Length: %d\r\n\r\n" % (len(audio) + 500) + part)
        s.close()
    for s in held:
        s.close()
    # malformed and random requests
    rng = random.Random(1037)
    alphabet = [b"{", b"}", b"[", b"]", b"\"q\"", b"\"target\"", b"\"demo\"", b":", b",", b"1e999", b"null",
                b"\"\\ud800\"", b"\xff\xfe", b"\"one\"", b"true", b" ", b"\x00", b"\"text\"", b"\"alternatives\""]
    bad = 0
    for i in range(count):
        kind = i % 6
        if kind == 0:  # random bytes as a request
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            status, _ = raw_request(port, data)
            ok = status in (None, 400, 404, 405, 413, 414, 431, 501, 505)
        else:
            path = rng.choice(["/translate", "/v2/translate", "/v1/audio/transcriptions", "/v1/audio/translations",
                               "/translate?x=1", "/%00", "/v1/models"])
            if kind == 1:  # random JSON-ish bodies
                body = b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
                ctype = b"application/json"
            elif kind == 2:  # forms with odd fields
                body = b"&".join(rng.choice([b"q=%ff%fe", b"q=", b"target=demo", b"alternatives=99", b"q=one",
                                             b"text=two", b"target_lang=xx", b"%zz", b"=", b"source=auto"])
                                 for _ in range(rng.randrange(0, 8)))
                ctype = b"application/x-www-form-urlencoded"
            elif kind == 3:  # multipart, broken or with a garbage file
                b2 = b"b%d" % i
                body = (b"--" + b2 + b"\r\nContent-Disposition: form-data; name=\"" +
                        rng.choice([b"file", b"model", b"stream", b"response_format"]) + b"\"" +
                        rng.choice([b"; filename=\"x.wav\"", b""]) + b"\r\n\r\n" +
                        bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200))) +
                        rng.choice([b"\r\n--" + b2 + b"--\r\n", b"", b"\r\n--" + b2]))
                ctype = b"multipart/form-data; boundary=" + b2
            elif kind == 4:  # a wrong or lying Content-Length
                body = b"{\"q\": \"one\", \"target\": \"demo\"}"
                ctype = b"application/json"
            else:  # bad headers and types
                body = b"q=one&target=demo"
                ctype = rng.choice([b"text/plain", b"multipart/form-data", b"application/json; charset=utf-8", b""])
            length = len(body) if kind != 4 else rng.choice([0, 1, len(body) - 3])
            head = b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: " + ctype + \
                   b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % length
            status, got = raw_request(port, head + body)
            ok = status in (200, 400, 404, 405, 413, None)
            if status and status >= 400 and status != 413:
                payload = got.split(b"\r\n\r\n", 1)[-1]
                try:
                    msg = json.loads(payload)["error"]["message"]
                    ok = ok and "\n" not in msg
                except (ValueError, KeyError, TypeError):
                    ok = False
        if not ok:
            bad += 1
            if bad < 5:
                print("fault request %d (kind %d): status %s" % (i, kind, status), file=sys.stderr)
        if i % 50 == 49:
            r = requests.get(sv.url + "/health", timeout=30)
            if not check(r.status_code == 200, "healthy after %d malformed requests" % (i + 1)):
                break
    check(bad == 0, "%d of %d malformed requests answered out of the rules" % (bad, count))
    check(sv.p.poll() is None, "the server survived the faults")
    r = requests.post(sv.url + "/translate", json={"q": texts[:5], "target": "demo"}, timeout=60)
    check(r.status_code == 200 and r.json()["translatedText"] == [want[t] for t in texts[:5]],
          "right answers after the faults")


def limits(vkformer, demo, texts, want):
    """API keys (401), --max-body (413), --max-queue (503 + Retry-After), --timeout (504),
    a client that leaves (its queued work cancelled)."""
    work = tempfile.mkdtemp(prefix="vkformer-serve-keys.")
    keys = os.path.join(work, "keys")
    with open(keys, "w") as f:
        f.write("# keys\nsecret-one\n\nsecret-two\n")
    sv = Server(vkformer, ["--model", demo, "--max-batch", "1", "--max-queue", "200", "--max-body", "65536",
                           "--timeout", "1", "--api-key-file", keys])
    url, auth = sv.url, {"Authorization": "Bearer secret-two"}
    sv.headers = auth
    try:
        body = {"q": "six", "target": "demo"}
        check(requests.post(url + "/translate", json=body, timeout=30).status_code == 401, "no key: 401")
        check(requests.post(url + "/translate", json=body, headers={"Authorization": "Bearer nope"},
                            timeout=30).status_code == 401, "wrong key: 401")
        for attempt in range(10):  # the first requests compile pipelines: they may pass --timeout 1
            r = requests.post(url + "/translate", json=body, headers=auth, timeout=30)
            if r.status_code != 504:
                break
        check(r.status_code == 200 and r.json()["translatedText"] == want["six"], "right key: 200 (%d)" % r.status_code)
        for attempt in range(10):  # and a long text's plan
            r = requests.post(url + "/translate", json={"q": " ".join(["thousand"] * 12), "target": "demo"},
                              headers=auth, timeout=30)
            if r.status_code != 504:
                break
        check(requests.get(url + "/health", timeout=30).status_code == 200, "/health needs no key")
        r = requests.post(url + "/translate", json={"q": "one " * 20000, "target": "demo"}, headers=auth, timeout=30)
        check(r.status_code == 413, "a body past --max-body: 413 (%d)" % r.status_code)

        def chunks():
            for _ in range(80):
                yield b"x" * 1000
        r = requests.post(url + "/translate", data=chunks(), headers=dict(auth, **{"Content-Type": "application/json"}),
                          timeout=30)
        check(r.status_code == 413, "a chunked body past --max-body: 413 (%d)" % r.status_code)
        # a client that leaves: its queued texts are cancelled
        long_text = " ".join(["thousand"] * 12)
        before = sv.metric("vkformer_cancelled_total")
        blocker = threading.Thread(target=lambda: requests.post(url + "/translate", json={"q": [long_text] * 32,
                                                                                          "target": "demo"},
                                                                headers=auth, timeout=60))
        blocker.start()
        deadline = time.time() + 30
        while time.time() < deadline and sv.metric("vkformer_active_slots") < 1:
            time.sleep(0.002)
        gone = json.dumps({"q": [long_text] * 4, "target": "demo"}).encode()
        s = socket.create_connection(("127.0.0.1", sv.port), timeout=10)
        s.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-one\r\nContent-Type: "
                  b"application/json\r\nContent-Length: %d\r\n\r\n" % len(gone) + gone)
        deadline = time.time() + 30  # its texts queued behind the blocker, then the client leaves
        while time.time() < deadline and sv.metric("vkformer_queue_depth") < 4:
            time.sleep(0.002)
        s.close()
        blocker.join(60)
        deadline = time.time() + 30
        while time.time() < deadline and sv.metric("vkformer_cancelled_total") < before + 4:
            time.sleep(0.01)
        check(sv.metric("vkformer_cancelled_total") >= before + 4, "a client that left: its 4 texts cancelled")
        # a full queue and a timeout: 128 long texts at one slot (4096 decode steps) take longer than 1 s
        many = {"q": [long_text] * 128, "target": "demo"}
        results = {}

        def send(name):
            results[name] = requests.post(url + "/translate", json=many, headers=auth, timeout=60)
        first = threading.Thread(target=send, args=("first",))
        first.start()
        deadline = time.time() + 30
        while time.time() < deadline and sv.metric("vkformer_queue_depth") < 100:
            time.sleep(0.002)
        send("second")
        first.join(60)
        r = results["second"]
        check(r.status_code == 503 and r.headers.get("Retry-After") == "1" and "queue full" in r.json()["error"]["message"],
              "past --max-queue: 503 with Retry-After (%d %s)" % (r.status_code, r.text))
        r = results.get("first")
        check(r is not None and r.status_code == 504 and "--timeout" in r.json()["error"]["message"],
              "past --timeout: 504 (%s)" % (r.text if r is not None else None))
        deadline = time.time() + 30
        while time.time() < deadline and (sv.metric("vkformer_queue_depth") or sv.metric("vkformer_active_slots")):
            time.sleep(0.01)
        check(sv.metric("vkformer_queue_depth") == 0 and sv.metric("vkformer_active_slots") == 0,
              "the timed-out request's work was cancelled")
        r = requests.post(url + "/translate", json=body, headers=auth, timeout=30)
        check(r.status_code == 200, "still answering after the limits")
        check(sv.stop() == 0, "exit 0 after SIGTERM")
    finally:
        if sv.p.poll() is None:
            sv.p.kill()
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------ a device lost under load

def test_devices(vkformer, demo, whisper, heldout):
    texts = texts_of(heldout, 20)
    want = cli_translate(vkformer, demo, texts)
    os.environ["VKFORMER_SCHEDULER_FAULT"] = "0:5"
    sv = Server(vkformer, ["--model", demo, "--devices", "all"])
    del os.environ["VKFORMER_SCHEDULER_FAULT"]
    try:
        check("2 devices" in "".join(sv.lines), "two devices: %s" % "".join(sv.lines))
        answers = [None] * 16

        def client(i):
            batch = texts[i % len(texts):][:3] or texts[:3]
            r = requests.post(sv.url + "/translate", json={"q": batch, "target": "demo"}, timeout=120)
            answers[i] = (r.status_code, r.json().get("translatedText") if r.status_code == 200 else r.text,
                          [want[t] for t in batch])
        threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        wrong = [a for a in answers if a is None or a[0] != 200 or a[1] != a[2]]
        check(not wrong, "every request answered right despite the lost device: %s" % wrong[:3])
        check(sv.metric("vkformer_failed_total", device="0") >= 1, "device 0 failed")
        check(sv.metric("vkformer_answered_total", device="1") >= 1, "device 1 answered")
        time.sleep(0.2)
        check(any("failed" in line and "go to the others" in line for line in sv.lines),
              "one line names the failed device: %s" % "".join(sv.lines))
        check(sv.stop() == 0, "exit 0 after SIGTERM: %s" % "".join(sv.lines[-3:]))
    finally:
        if sv.p.poll() is None:
            sv.p.kill()


# ------------------------------------------------------------------ the openai client

OPENAI_JS = r"""
const fs = require('fs');
const OpenAI = require(process.argv[2] + '/node_modules/openai');
(async () => {
  const client = new OpenAI({apiKey: 'none', baseURL: process.argv[3] + '/v1', maxRetries: 0, timeout: 60000});
  const out = {};
  const models = await client.models.list();
  out.models = models.data.map(m => m.id).sort();
  const plain = await client.audio.transcriptions.create({file: fs.createReadStream(process.argv[4]),
                                                          model: 'whisper-numbers'});
  out.text = plain.text;
  const stream = await client.audio.transcriptions.create({file: fs.createReadStream(process.argv[4]),
                                                           model: 'whisper-numbers', stream: true});
  out.events = [];
  for await (const e of stream) out.events.push(e);
  const verbose = await client.audio.transcriptions.create({file: fs.createReadStream(process.argv[4]),
                                                            model: 'whisper-1', response_format: 'verbose_json'});
  out.segments = verbose.segments.length;
  try {
    await client.audio.transcriptions.create({file: fs.createReadStream(process.argv[4]), model: 'nope'});
    out.error = null;
  } catch (e) { out.error = {status: e.status, message: e.error && e.error.message}; }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(String(e)); process.exit(1); });
"""


def test_openai(vkformer, demo, whisper, heldout):
    node = shutil.which("node")
    if not node:
        print("SKIP: node is missing (tools/setup.sh --swiftshader installs npm and node)", file=sys.stderr)
        return 77
    here = os.path.dirname(os.path.abspath(__file__))
    fetch = os.path.join(here, "..", "tools", "fetch_openai_js.sh")
    found = subprocess.run([fetch, "--check"], capture_output=True, text=True)
    if found.returncode != 0:
        print("SKIP: " + found.stderr.strip(), file=sys.stderr)
        return 77
    pkg = found.stdout.strip()
    work = tempfile.mkdtemp(prefix="vkformer-serve-openai.")
    wav = os.path.join(work, "speech.wav")
    speak(wav, "four hundred twelve")
    want = cli_transcribe(vkformer, whisper, wav)
    script = os.path.join(work, "client.js")
    with open(script, "w") as f:
        f.write(OPENAI_JS)
    sv = Server(vkformer, ["--model", demo, "--model", whisper])
    try:
        out = subprocess.run([node, script, pkg, sv.url, wav], capture_output=True, text=True, timeout=120)
        if not check(out.returncode == 0, "the openai client ran: " + out.stderr):
            return 1
        got = json.loads(out.stdout)
        check(got["models"] == ["demo", "whisper-numbers"], "openai models.list: %s" % got["models"])
        check(got["text"] == want, "openai transcription %r equals vkformer transcribe %r" % (got["text"], want))
        ev = got["events"]
        check(ev and ev[-1]["type"] == "transcript.text.done" and ev[-1]["text"] == want and
              all(e["type"] == "transcript.text.delta" for e in ev[:-1]), "openai stream=true events: %s" % ev)
        check(got["segments"] >= 1, "openai verbose_json segments")
        check(got["error"] and got["error"]["status"] == 404 and "nope" in (got["error"]["message"] or ""),
              "openai error surfaced: %s" % got["error"])
        check(sv.stop() == 0, "exit 0 after SIGTERM")
    finally:
        if sv.p.poll() is None:
            sv.p.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main():
    quick = "--quick" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--quick"]
    if len(args) != 5 or args[0] not in ("clients", "openai", "devices"):
        print(__doc__, file=sys.stderr)
        return 2
    what, vkformer, demo, whisper, heldout = args
    if what == "openai":
        code = test_openai(vkformer, demo, whisper, heldout)
        if code:
            return code
    elif what == "devices":
        test_devices(vkformer, demo, whisper, heldout)
    else:
        test_clients(vkformer, demo, whisper, heldout, quick)
    if FAILURES:
        print("serve-%s: %d failures" % (what, len(FAILURES)), file=sys.stderr)
        return 1
    print("serve-%s: ok" % what, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
