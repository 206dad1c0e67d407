"""A local stand-in for a dataset download server: torchvision-format files written by the
tests, served over http://127.0.0.1 from a thread, and torchvision's mirror list pointed at it."""

import contextlib
import gzip
import hashlib
import http.server
import socket
import struct
import threading

import numpy as np
import torchvision

IDX_NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def write_idx(path, array):
    """Write a uint8 array in the IDX format (big-endian dims after a magic number)."""
    array = np.asarray(array, dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(struct.pack(">i", (0x08 << 8) | array.ndim))
        for dim in array.shape:
            f.write(struct.pack(">i", dim))
        f.write(array.tobytes())


def fashion_mnist_archives(folder, n_train=60, n_test=20, seed=1):
    """Gzipped IDX files as torchvision downloads them; returns [(filename, md5)] and the arrays."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arrays = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        arrays[f"{prefix}-images-idx3-ubyte"] = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        arrays[f"{prefix}-labels-idx1-ubyte"] = (np.arange(n) % 10).astype(np.uint8)
    resources = []
    for name in IDX_NAMES:
        raw = folder / name
        write_idx(raw, arrays[name])
        gz = folder / f"{name}.gz"
        gz.write_bytes(gzip.compress(raw.read_bytes(), mtime=0))
        raw.unlink()
        resources.append((gz.name, hashlib.md5(gz.read_bytes()).hexdigest()))
    return resources, arrays


class _Quiet(http.server.SimpleHTTPRequestHandler):
    hits: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.hits.append(self.path)
        super().do_GET()


@contextlib.contextmanager
def serve(folder):
    """Serve ``folder`` on http://127.0.0.1:PORT/; yields (base_url, hits: list of paths)."""
    hits = []
    handler = type("Handler", (_Quiet,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a, **kw: handler(*a, directory=str(folder), **kw))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", hits
    finally:
        server.shutdown()
        server.server_close()


def closed_port_url():
    """A URL on 127.0.0.1 whose port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def point_fashion_mnist_at(monkeypatch, base_url, resources):
    """Make torchvision's FashionMNIST download ``resources`` from ``base_url``."""
    cls = torchvision.datasets.FashionMNIST
    monkeypatch.setattr(cls, "mirrors", [base_url])
    monkeypatch.setattr(cls, "resources", list(resources))
