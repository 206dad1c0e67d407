"""Tests for greenlab.data: torchvision files on disk, downloads from a local mirror, the
download rules, the generated fallback, both loaders."""

import hashlib
import pickle
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision

import fake_mirror
from greenlab.session import config
from greenlab.training import data, datacache


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("GREENLAB_DOWNLOAD", "GREENLAB_QUICK", "CI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GREENLAB_QUICK", "1")  # tests opt into full mode where they need it
    monkeypatch.setenv("GREENLAB_DOWNLOAD", "0")  # and into downloads
    monkeypatch.setattr(config, "_current", None)  # no earlier setup() decides the mode
    monkeypatch.setattr(datacache, "_dead_hosts", {})  # no host remembered from another test


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to resolve a name or open a connection is recorded and fails."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise AssertionError(f"network use: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """FashionMNIST served from http://127.0.0.1 (torchvision's mirror list points there)."""
    resources, arrays = fake_mirror.fashion_mnist_archives(tmp_path / "mirror")
    with fake_mirror.serve(tmp_path / "mirror") as (url, hits):
        fake_mirror.point_fashion_mnist_at(monkeypatch, url, resources)
        yield {"url": url, "hits": hits, "arrays": arrays, "folder": tmp_path / "mirror"}


def _fake_fashion_mnist(root, n_train=60, n_test=20):
    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(1)
    files = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = np.arange(n, dtype=np.uint8) % 10
        fake_mirror.write_idx(raw / f"{prefix}-images-idx3-ubyte", images)
        fake_mirror.write_idx(raw / f"{prefix}-labels-idx1-ubyte", labels)
        files[prefix] = (images, labels)
    return files


def test_fashion_mnist_through_torchvision_from_idx_files(tmp_path, capsys):
    files = _fake_fashion_mnist(tmp_path)
    ds = data.load("fashion-mnist", root=tmp_path)
    assert ds.source == "torchvision" and "FashionMNIST" in ds.note
    # 10% of the 60 training images are held out for validation, by a seeded permutation
    assert ds.input_shape == (1, 28, 28) and ds.n_train == 54 and ds.n_val == 6 and ds.n_test == 20
    assert ds.train_x.dtype == torch.float32 and ds.train_y.dtype == torch.long
    images, labels = files["train"]
    rows = torch.arange(60)
    train_rows, _, val_rows, _ = data.split_validation(rows, rows, 6, seed=0)
    assert sorted(train_rows.tolist() + val_rows.tolist()) == list(range(60))  # a partition
    assert torch.equal(ds.train_y, torch.as_tensor(labels, dtype=torch.long)[train_rows])
    assert torch.equal(ds.val_y, torch.as_tensor(labels, dtype=torch.long)[val_rows])
    pixels = ds.train_x * ds.std[0] + ds.mean[0]
    assert torch.allclose(pixels[:, 0], torch.as_tensor(images[train_rows.numpy()]).float() / 255, atol=1e-5)
    val_pixels = ds.val_x * ds.std[0] + ds.mean[0]
    assert torch.allclose(val_pixels[:, 0], torch.as_tensor(images[val_rows.numpy()]).float() / 255, atol=1e-5)
    assert abs(float(ds.train_x.mean())) < 1e-4  # normalised with the training split's statistics
    assert "source torchvision" in capsys.readouterr().out


def test_fashion_mnist_subset_is_seeded(tmp_path):
    _fake_fashion_mnist(tmp_path)
    a = data.load("fashion-mnist", n_train=25, n_test=5, root=tmp_path, verbose=False)
    b = data.load("fashion-mnist", n_train=25, n_test=5, root=tmp_path, verbose=False)
    assert a.n_train == 25 and a.n_test == 5 and torch.equal(a.train_x, b.train_x)
    # the validation images come from the training pool and are never training images too
    assert a.n_val == 2 and torch.equal(a.val_x, b.val_x)
    flat = lambda t: {tuple(r.tolist()) for r in t.flatten(1)}  # noqa: E731
    assert not flat(a.val_x) & flat(a.train_x)


def test_cifar10_through_torchvision_from_pickle_batches(tmp_path, monkeypatch):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(2)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    written = {}
    for name in names:
        batch = {"data": rng.integers(0, 256, size=(8, 3 * 32 * 32), dtype=np.uint8),
                 "labels": [int(v) for v in rng.integers(0, 10, size=8)]}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f)
        written[name] = batch
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"class{i}" for i in range(10)]}, f)

    def md5(name):
        return hashlib.md5((folder / name).read_bytes()).hexdigest()

    # torchvision verifies the published checksums; point them at our stand-in files
    cls = torchvision.datasets.CIFAR10
    monkeypatch.setattr(cls, "train_list", [[n, md5(n)] for n in names[:5]])
    monkeypatch.setattr(cls, "test_list", [["test_batch", md5("test_batch")]])
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": md5("batches.meta")})

    ds = data.load("cifar10", root=tmp_path, verbose=False)
    assert ds.source == "torchvision" and ds.input_shape == (3, 32, 32)
    assert ds.n_train == 36 and ds.n_val == 4 and ds.n_test == 8 and ds.classes[0] == "class0"
    rows = torch.arange(40)
    train_rows, _, val_rows, _ = data.split_validation(rows, rows, 4, seed=0)
    labels = torch.tensor(sum((written[n]["labels"] for n in names[:5]), []))
    assert torch.equal(ds.train_y, labels[train_rows]) and torch.equal(ds.val_y, labels[val_rows])
    first_row = int(train_rows[0])  # training rows keep their order
    batch, row = names[first_row // 8], first_row % 8
    first = torch.as_tensor(written[batch]["data"][row].reshape(3, 32, 32)).float() / 255
    mean = torch.tensor(ds.mean)[:, None, None]
    std = torch.tensor(ds.std)[:, None, None]
    assert torch.allclose(ds.train_x[0] * std + mean, first, atol=1e-5)


@pytest.mark.parametrize("env", [{"CI": "true"}, {"CI": "1", "GREENLAB_QUICK": "0"},
                                 {"GREENLAB_DOWNLOAD": "0"}])
def test_ci_and_download_0_never_touch_the_network(env, monkeypatch, no_network, capsys, tmp_path):
    monkeypatch.delenv("GREENLAB_DOWNLOAD")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("fashion-mnist", "cifar10"):
        ds = data.load(name, n_train=200, n_test=50)
        assert ds.source == "generated" and ("CI never downloads" in ds.note
                                             or "GREENLAB_DOWNLOAD=0 forbids" in ds.note)
        assert f"greenlab data fetch {name}" in ds.note
    assert no_network == [] and not (tmp_path / "cache").exists()  # nothing written either
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all("source generated" in line and "NOTE: not the real" in line for line in out)
    assert all("greenlab data fetch" not in line for line in out)  # the hint stays in ds.note


def test_quick_mode_downloads_the_real_data_from_the_mirror(mirror, monkeypatch, capsys):
    monkeypatch.delenv("GREENLAB_DOWNLOAD")
    assert config.is_quick()
    ds = data.load("fashion-mnist", n_train=40, n_test=20)
    assert ds.source == "torchvision" and "checksums verified" in ds.note
    assert len(mirror["hits"]) == 4
    assert "source torchvision" in capsys.readouterr().out


def test_an_unreachable_host_is_tried_once_per_lesson_not_once_per_load(monkeypatch):
    monkeypatch.delenv("GREENLAB_DOWNLOAD")
    dead = fake_mirror.closed_port_url()
    monkeypatch.setattr(torchvision.datasets.FashionMNIST, "mirrors", [dead])
    tried = []
    real_resolve = datacache._resolve
    monkeypatch.setattr(datacache, "_resolve", lambda url, t: (tried.append(url), real_resolve(url, t)))
    first = data.load("fashion-mnist", n_train=50, n_test=10, verbose=False)
    second = data.load("fashion-mnist", n_train=50, n_test=10, verbose=False)
    assert first.source == second.source == "generated" and len(tried) == 1
    assert "not tried again" in second.note
    monkeypatch.setattr(datacache, "DEAD_HOST_S", 0.0)  # remembered for a while only
    data.load("fashion-mnist", n_train=50, n_test=10, verbose=False)
    assert len(tried) == 2


def test_download_forbidden_by_environment_uses_no_network(monkeypatch, no_network):
    monkeypatch.setenv("GREENLAB_QUICK", "0")
    monkeypatch.setenv("GREENLAB_DOWNLOAD", "0")
    ds = data.load("fashion-mnist", n_train=100, n_test=20, verbose=False)
    assert ds.source == "generated" and "GREENLAB_DOWNLOAD=0 forbids downloads" in ds.note
    assert no_network == []


def test_policy_reads_the_environment(monkeypatch):
    monkeypatch.delenv("GREENLAB_DOWNLOAD")
    monkeypatch.setenv("GREENLAB_QUICK", "0")
    assert datacache.policy()[0] == "try"
    monkeypatch.setenv("GREENLAB_QUICK", "1")
    assert datacache.policy()[0] == "try"  # quick mode downloads too
    for ci in ("true", "1", "yes"):
        monkeypatch.setenv("CI", ci)
        assert datacache.policy() == ("never", "CI is set, and CI never downloads (GREENLAB_DOWNLOAD=1 to override)")
    for not_ci in ("", "0", "false"):
        monkeypatch.setenv("CI", not_ci)
        assert datacache.policy()[0] == "try"
    monkeypatch.setenv("CI", "true")
    assert datacache.policy(True)[0] == "try" and datacache.policy(False)[0] == "never"
    monkeypatch.setenv("GREENLAB_DOWNLOAD", "0")
    assert datacache.policy()[0] == "never"
    monkeypatch.setenv("GREENLAB_DOWNLOAD", "1")
    assert datacache.policy()[0] == "require"  # an explicit demand wins over CI
    monkeypatch.setenv("GREENLAB_DOWNLOAD", "maybe")
    with pytest.raises(ValueError, match="GREENLAB_DOWNLOAD must be 1"):
        datacache.policy()
    with pytest.raises(ValueError, match="download must be True, False or None"):
        data.load("fashion-mnist", download="yes", verbose=False)


def test_full_mode_downloads_from_the_mirror_verifies_and_reuses_the_cache(mirror, monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_QUICK", "0")
    monkeypatch.delenv("GREENLAB_DOWNLOAD")
    ds = data.load("fashion-mnist", verbose=False)
    assert ds.source == "torchvision" and "checksums verified" in ds.note
    assert str(tmp_path / "cache") in ds.note  # the one shared cache (GREENLAB_CACHE_DIR)
    assert sorted(mirror["hits"]) == sorted(f"/{n}.gz" for n in fake_mirror.IDX_NAMES)
    labels = mirror["arrays"]["t10k-labels-idx1-ubyte"]
    assert sorted(ds.test_y.tolist()) == sorted(labels.tolist())
    st = datacache.status("fashion-mnist")
    assert st.state == "verified" and st.folder == tmp_path / "cache" / "FashionMNIST" / "raw"
    assert not list(st.folder.glob("*.part"))
    again = data.load("fashion-mnist", verbose=False)
    assert again.source == "torchvision" and len(mirror["hits"]) == 4  # served from the cache
    assert torch.equal(again.train_x, ds.train_x)


def test_corrupt_cached_archive_is_detected_and_downloaded_again(mirror, monkeypatch):
    datacache.fetch("fashion-mnist", progress=False)
    archive = datacache.folder("fashion-mnist") / "train-labels-idx1-ubyte.gz"
    raw = bytearray(archive.read_bytes())
    raw[-5] ^= 0xFF
    archive.write_bytes(bytes(raw))
    st = datacache.status("fashion-mnist")
    assert st.state == "corrupt" and "train-labels-idx1-ubyte.gz fails its MD5 checksum" in st.detail
    offline = data.load("fashion-mnist", verbose=False)  # GREENLAB_DOWNLOAD=0: no data
    assert offline.source == "generated" and "corrupt" in offline.note and "MD5" in offline.note
    monkeypatch.delenv("GREENLAB_DOWNLOAD")
    ds = data.load("fashion-mnist", verbose=False)
    assert ds.source == "torchvision" and mirror["hits"].count("/train-labels-idx1-ubyte.gz") == 2
    assert datacache.status("fashion-mnist").state == "verified"


def test_damaged_extracted_file_is_restored_from_its_verified_archive_offline(mirror, no_network):
    # stage by copying the served archives into the cache, as an instructor's shared folder would
    folder = datacache.folder("fashion-mnist")
    folder.mkdir(parents=True)
    for name in fake_mirror.IDX_NAMES:
        (folder / f"{name}.gz").write_bytes((mirror["folder"] / f"{name}.gz").read_bytes())
    assert datacache.status("fashion-mnist").state == "corrupt"  # archives there, not extracted
    ds = data.load("fashion-mnist", verbose=False)
    assert ds.source == "torchvision" and "checksums verified" in ds.note
    target = folder / "t10k-images-idx3-ubyte"
    target.write_bytes(target.read_bytes()[:-10] + bytes(10))
    assert "differs from its verified archive" in datacache.status("fashion-mnist").detail
    again = data.load("fashion-mnist", verbose=False)
    assert torch.equal(again.test_x, ds.test_x) and no_network == []


def test_mirror_with_wrong_bytes_fails_the_checksum_and_leaves_nothing(mirror, monkeypatch):
    bad = list(torchvision.datasets.FashionMNIST.resources)
    bad[0] = (bad[0][0], "0" * 32)
    monkeypatch.setattr(torchvision.datasets.FashionMNIST, "resources", bad)
    with pytest.raises(datacache.FetchError, match="checksum mismatch"):
        datacache.fetch("fashion-mnist", progress=False)
    assert not list(datacache.folder("fashion-mnist").iterdir())  # no .part, no unchecked file


def test_offline_full_mode_falls_back_fast_with_one_line(monkeypatch, capsys):
    monkeypatch.setenv("GREENLAB_QUICK", "0")
    monkeypatch.delenv("GREENLAB_DOWNLOAD")
    monkeypatch.setattr(torchvision.datasets.FashionMNIST, "mirrors", [fake_mirror.closed_port_url()])
    attempts = []  # fast means one attempt on the refused host, no retry loop
    get = datacache._get
    monkeypatch.setattr(datacache, "_get", lambda url, *a, **k: attempts.append(url) or get(url, *a, **k))
    ds = data.load("fashion-mnist", n_train=300, n_test=50)
    assert ds.source == "generated" and len(attempts) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "a download of FashionMNIST" in out[0] and "was tried and failed" in out[0]
    assert "Connection refused" in out[0] or "refused" in out[0].lower()


def test_required_download_that_fails_is_an_error(monkeypatch):
    monkeypatch.setenv("GREENLAB_DOWNLOAD", "1")
    monkeypatch.setattr(torchvision.datasets.FashionMNIST, "mirrors", [fake_mirror.closed_port_url()])
    with pytest.raises(RuntimeError, match="GREENLAB_DOWNLOAD=1 requires downloads"):
        data.load("fashion-mnist", verbose=False)


def test_generated_stand_in_is_labelled_as_not_comparable(capsys):
    ds = data.load("fashion-mnist", n_train=200, n_test=50)
    assert ds.source == "generated" and "not comparable with published" in ds.note
    assert ds.input_shape == (1, 28, 28) and ds.n_train == 200 and ds.n_test == 50
    assert set(ds.train_y.tolist()) == set(range(10))
    assert "NOTE" in capsys.readouterr().out


def test_generated_data_is_deterministic_and_seed_dependent():
    a = data.load("synthetic", n_train=100, n_test=20, verbose=False)
    b = data.load("synthetic", n_train=100, n_test=20, verbose=False)
    c = data.load("synthetic", n_train=100, n_test=20, seed=1, verbose=False)
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_y, b.test_y)
    assert not torch.equal(a.train_x, c.train_x)
    assert torch.isfinite(a.train_x).all()


def test_generated_classes_are_learnable_but_not_trivial():
    ds = data.generate("synthetic", n_train=600, n_test=300, seed=0)
    # nearest class mean on raw pixels: better than chance, not perfect
    x, y = ds.train_x.flatten(1), ds.train_y
    means = torch.stack([x[y == k].mean(0) for k in range(10)])
    pred = torch.cdist(ds.test_x.flatten(1), means).argmin(1)
    acc = (pred == ds.test_y).float().mean().item()
    assert 0.2 < acc < 0.99


def _accuracies(model, ds, steps, every, batch_size=128, lr=0.05):
    """Test accuracy every ``every`` steps of SGD (the course's defaults: momentum 0.9, lr 0.05);
    returns ({step: accuracy}, last predictions)."""
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    order = torch.randperm(ds.n_train, generator=torch.Generator().manual_seed(0))
    accuracies = {}
    for step in range(1, steps + 1):
        start = ((step - 1) * batch_size) % (ds.n_train - batch_size)
        rows = order[start:start + batch_size]
        model.train()
        loss = torch.nn.functional.cross_entropy(model(ds.train_x[rows]), ds.train_y[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0:
            model.eval()
            with torch.no_grad():
                pred = model(ds.test_x).argmax(1)
            accuracies[step] = float((pred == ds.test_y).float().mean())
    return accuracies, pred


def test_stand_in_relates_the_course_models_as_fashion_mnist_does():
    from greenlab.training import models

    ds = data.generate("fashion-mnist", n_train=4000, n_test=600, seed=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small batches: one thread is fastest, and immune to a busy machine
    try:
        linear, _ = _accuracies(models.build("mlp", hidden=()), ds, steps=200, every=50)
        mlp, _ = _accuracies(models.build("mlp"), ds, steps=200, every=50)
        cnn, pred = _accuracies(models.build("cnn"), ds, steps=200, every=50)  # the lessons' reference CNN
    finally:
        torch.set_num_threads(threads)
    summary = f"linear {linear}, mlp {mlp}, cnn {cnn}"
    print(summary)
    assert 0.30 <= cnn[100] <= 0.93, summary  # learnable, not trivial, after 100 steps of batch 128
    assert cnn[50] < cnn[100] - 0.05 and max(cnn[150], cnn[200]) > cnn[100], summary  # still learning
    assert linear[200] < mlp[200] - 0.15 and mlp[200] < cnn[200] - 0.03, summary  # linear < MLP < CNN
    # the CNN's mistakes fall mostly within the confusable pairs (6 of the 90 kinds of mistake)
    wrong = pred != ds.test_y
    truth, guess = ds.test_y[wrong].tolist(), pred[wrong].tolist()
    paired = {frozenset(p) for p in data.CONFUSABLE_PAIRS}
    within = sum(frozenset((t, g)) in paired for t, g in zip(truth, guess))
    assert within > 0.5 * len(truth), f"{within} of {len(truth)} mistakes within pairs; {summary}"


@pytest.mark.parametrize("kw,match", [({"name": "imagenet"}, "allowed: fashion-mnist, cifar10, synthetic"),
                                      ({"name": "cifar10", "n_train": 0}, "n_train"),
                                      ({"name": "cifar10", "n_test": -5}, "n_test"),
                                      ({"name": "synthetic", "difficulty": -1}, "difficulty")])
def test_bad_input_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        data.load(**kw, verbose=False)


def test_device_loader_covers_every_sample_once_per_epoch():
    x = torch.arange(10).float().view(10, 1, 1, 1)
    y = torch.arange(10)
    loader = data.DeviceLoader(x, y, batch_size=4, seed=0)
    assert len(loader) == 3
    first = [yb.tolist() for _, yb in loader]
    assert [len(b) for b in first] == [4, 4, 2]
    assert sorted(sum(first, [])) == list(range(10))
    second = [yb.tolist() for _, yb in loader]
    assert second != first  # reshuffled each pass
    again = [yb.tolist() for _, yb in data.DeviceLoader(x, y, batch_size=4, seed=0)]
    assert again == first  # same seed, same order
    for xb, yb in loader:
        assert torch.equal(xb.view(-1).long(), yb)  # pairs stay together
    loader.set_batch_size(3)
    assert len(loader) == 4
    dropped = data.DeviceLoader(x, y, batch_size=4, drop_last=True, shuffle=False)
    assert [yb.tolist() for _, yb in dropped] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="positive integer"):
        loader.set_batch_size(0)


def test_augment_flip_and_crop_on_tensors():
    x = torch.arange(2 * 1 * 4 * 4).float().view(2, 1, 4, 4) + 1
    g = torch.Generator().manual_seed(0)
    flipped = data.Augment(flip=True, crop_padding=0).apply(x, g)
    for i in range(2):
        assert torch.equal(flipped[i], x[i]) or torch.equal(flipped[i], x[i].flip(2))
    cropped = data.Augment(flip=False, crop_padding=1).apply(x.repeat(50, 1, 1, 1), g)
    assert cropped.shape == (100, 1, 4, 4)
    padded = torch.nn.functional.pad(x, (1, 1, 1, 1))
    for i in range(0, 100, 7):
        src = padded[i % 2, 0]
        windows = [src[a:a + 4, b:b + 4] for a in range(3) for b in range(3)]
        assert any(torch.equal(cropped[i, 0], w) for w in windows)
    assert not all(torch.equal(cropped[i], x[i % 2]) for i in range(100))  # some were shifted
    with pytest.raises(ValueError, match="augment"):
        data.as_augment("rotate")


def test_make_dataloader_iterates_and_changes_batch_size():
    ds = data.load("synthetic", n_train=50, n_test=10, verbose=False)
    loader = data.make_dataloader(ds, batch_size=16, augment=True)
    batches = list(loader)
    assert [b[0].shape[0] for b in batches] == [16, 16, 16, 2]
    assert sum(b[1].numel() for b in batches) == 50
    loader.set_batch_size(25)
    assert len(loader) == 2
    test = data.make_dataloader(ds, batch_size=4, split="test", shuffle=False)
    assert torch.equal(torch.cat([b[1] for b in test]), ds.test_y)
    with pytest.raises(ValueError, match="prefetch_factor"):
        data.make_dataloader(ds, batch_size=4, prefetch_factor=2)


def test_subset_by_rows_and_by_classes_relabels_and_keeps_the_test_split():
    from greenlab.training import data as gd

    ds = gd.load("synthetic", n_train=200, n_test=100, verbose=False)
    first = ds.subset(train_indices=50)
    assert first.n_train == 50 and first.n_test == ds.n_test
    assert torch.equal(first.train_x, ds.train_x[:50])
    picked = ds.subset(train_indices=[3, 1, 4])
    assert torch.equal(picked.train_y, ds.train_y[[3, 1, 4]])

    two = ds.subset(classes=[7, 2])
    assert two.num_classes == 2 and set(two.train_y.tolist()) <= {0, 1}
    assert int((two.train_y == 0).sum()) == int((ds.train_y == 7).sum())  # 7 became 0
    assert int((two.test_y == 1).sum()) == int((ds.test_y == 2).sum())    # 2 became 1
    both = ds.subset(train_indices=5, classes=[0, 1])
    assert both.n_train == 5 and both.num_classes == 2
    assert ds.n_train == 200 and ds.num_classes == 10  # the original is untouched
    # the validation split follows: kept whole by a row subset, filtered and relabelled by classes
    assert torch.equal(first.val_x, ds.val_x)
    assert int((two.val_y == 0).sum()) == int((ds.val_y == 7).sum()) and two.n_val > 0
    assert set(two.val_y.tolist()) <= {0, 1} and "validation" in two.describe()


def test_both_loaders_give_the_same_sample_order_on_a_cpu():
    from greenlab.training import data as gd

    ds = gd.load("synthetic", n_train=100, n_test=10, verbose=False)
    device = gd.DeviceLoader(ds.train_x, ds.train_y, 16, seed=3)
    torch_loader = gd.make_dataloader(ds, 32, seed=3)  # the batch size does not change the order
    for _ in range(2):  # two passes: the second permutation matches too
        a = torch.cat([x for x, _ in device])
        b = torch.cat([x for x, _ in torch_loader])
        assert torch.equal(a, b)
    other = torch.cat([x for x, _ in gd.make_dataloader(ds, 32, seed=4)])
    assert not torch.equal(other, a)


def test_every_dataset_has_a_seeded_validation_split():
    from greenlab.training import data as gd

    a = gd.load("synthetic", n_train=300, n_test=50, verbose=False)
    b = gd.load("synthetic", n_train=300, n_test=50, verbose=False)
    assert a.n_train == 300 and a.n_val == 30 and a.n_test == 50  # 10% more, drawn like training images
    assert torch.equal(a.val_x, b.val_x) and torch.equal(a.val_y, b.val_y)
    assert not torch.equal(a.val_x, a.test_x[:30])
    assert "300 train / 30 validation / 50 test" in a.describe()
    assert gd.validation_size(1) == 0 and gd.validation_size(2) == 1 and gd.validation_size(1000) == 100
    assert gd.validation_size(10**6) == gd.VAL_MAX_SIZE
    # a Dataset built from tensors without one carves it from its training rows, seeded
    x, y = torch.arange(40.0).reshape(40, 1, 1, 1), torch.arange(40) % 2
    made = gd.Dataset("t", x, y, x[:4], y[:4], num_classes=2, source="generated")
    again = gd.Dataset("t", x, y, x[:4], y[:4], num_classes=2, source="generated")
    assert made.n_train == 36 and made.n_val == 4 and torch.equal(made.val_x, again.val_x)
    seen = sorted(made.train_x.flatten().tolist() + made.val_x.flatten().tolist())
    assert seen == x.flatten().tolist()  # no row lost, none in both
    with pytest.raises(ValueError, match="val_x and val_y"):
        gd.Dataset("t", x, y, x[:4], y[:4], num_classes=2, source="generated", val_x=x[:3])
    val_loader = gd.make_dataloader(a, batch_size=8, split="val", shuffle=False)
    assert torch.equal(torch.cat([yb for _, yb in val_loader]), a.val_y)


def test_subset_rejects_bad_requests():
    from greenlab.training import data as gd

    ds = gd.load("synthetic", n_train=20, n_test=10, verbose=False)
    for bad in ([], [1, 1], [10], [-1]):
        with pytest.raises(ValueError, match="classes"):
            ds.subset(classes=bad)
    for bad in (0, 21, [20], [[0]]):
        with pytest.raises(ValueError, match="train_indices"):
            ds.subset(train_indices=bad)


# --- where the cache is, outside a checkout ---------------------------------------------------------


def test_outside_a_checkout_the_cache_is_the_users_xdg_cache_never_the_package(monkeypatch, tmp_path):
    from greenlab.base import paths

    monkeypatch.delenv("GREENLAB_CACHE_DIR")
    monkeypatch.delenv("GREENLAB_DATA_DIR", raising=False)
    assert paths.cache_dir() == paths.repo_root() / "data" / "cache"  # a checkout keeps data/cache
    monkeypatch.setattr(paths, "in_checkout", lambda: False)  # a wheel install
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_dir() == tmp_path / "xdg" / "greenlab"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.cache_dir() == tmp_path / "home" / ".cache" / "greenlab"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as the spec says
    assert paths.cache_dir() == tmp_path / "home" / ".cache" / "greenlab"
    assert paths.package_folder() not in paths.cache_dir().parents
    monkeypatch.setenv("GREENLAB_CACHE_DIR", str(tmp_path / "mine"))
    assert paths.cache_dir() == tmp_path / "mine"


def test_a_read_only_cache_falls_back_saying_how_to_fix_it(mirror, monkeypatch, tmp_path, capsys):
    """A hub's shared install, or a package folder, that the learner cannot write: the stand-in
    comes with the variable to set, not silently."""
    import os

    if os.geteuid() == 0:  # root writes anywhere: a read-only folder is simulated
        real_mkdir = Path.mkdir

        def refuse(self, *args, **kwargs):
            if str(self).startswith(str(tmp_path / "cache")):
                raise PermissionError(13, "Permission denied", str(self))
            return real_mkdir(self, *args, **kwargs)

        monkeypatch.setattr(Path, "mkdir", refuse)
    else:
        (tmp_path / "ro").mkdir()
        (tmp_path / "ro").chmod(0o500)
        monkeypatch.setenv("GREENLAB_CACHE_DIR", str(tmp_path / "ro" / "cache"))
    monkeypatch.delenv("GREENLAB_DOWNLOAD")
    ds = data.load("fashion-mnist", n_train=40, n_test=20)
    out = capsys.readouterr().out
    assert ds.source == "generated" and mirror["hits"] == []
    assert "is not writable here" in out and "set GREENLAB_CACHE_DIR to a folder you can write" in out
    assert "greenlab data fetch" in out


def test_an_empty_cache_falls_back_without_importing_torchvision(tmp_path):
    # torchvision takes over a second to import: an offline run with nothing cached (a grader, a
    # laptop on a train) goes straight to the stand-in; with files there, torchvision reads them
    import subprocess
    import sys

    (tmp_path / "FashionMNIST" / "raw").mkdir(parents=True)  # an empty folder a failed download left
    code = ("import sys\nfrom greenlab.training import data, datacache\n"
            f"found = datacache.ensure('fashion-mnist', {str(tmp_path)!r}, network=False)\n"
            "assert found.state == 'missing' and not found.usable, found\n"
            f"ds = data.load('fashion-mnist', n_train=64, n_test=16, root={str(tmp_path)!r}, download=False)\n"
            "assert ds.source == 'generated' and 'torchvision' not in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.returncode == 0, done.stderr[-2000:]
