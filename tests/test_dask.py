"""calibkit.io.dask on a distributed.LocalCluster with 2 worker processes (loopback only): the
one-shot numbers, whatever the partitioning, with uneven, padding-only and empty partitions."""

import numpy as np
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import calibkit  # noqa: E402
from calibkit.io.dask import calibration_report  # noqa: E402

FLOATS = ("ece", "mce", "ace", "sce", "cece", "msece", "wsece", "ece_variance", "rbece", "fce")
FLOATS += ("overconfidence", "ecd", "esce", "brier", "nll", "accuracy")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def assert_same(got, expected, tol=1e-12):
    assert got["n"] == expected["n"]
    for key in FLOATS:
        assert abs(got[key] - expected[key]) <= tol * max(1.0, abs(expected[key])), key
    np.testing.assert_allclose(got["subset_ece"], expected["subset_ece"], rtol=tol, atol=tol)
    assert got["ace_error_bound"] == 0.0


def make(n=20000, k=4, seed=0):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(n, k)) * 2.5).astype(np.float32)
    y = rng.integers(0, k, n)
    y[::7] = -100
    return z, y


def test_arrays_with_uneven_empty_and_padding_partitions(client):
    z, y = make()
    y[5000:9000] = -100  # the second partition holds only padding
    chunks = ((5000, 4000, 0, 10000, 1000),)  # uneven, one empty
    logits = da.from_array(z, chunks=(chunks[0], (4,)))
    labels = da.from_array(y, chunks=chunks)
    expected = calibkit.calibration_report(z, y, from_logits=True)
    got = calibration_report(logits, labels, from_logits=True, max_samples=500)
    assert got["partitions"] == 5 and got["passes"] >= 2
    assert_same(got, expected)
    # the partitioning does not matter
    again = calibration_report(
        da.from_array(z, chunks=(3333, 2)), da.from_array(y, chunks=777), from_logits=True, split_every=2
    )
    assert_same(again, expected)


def test_token_arrays(client):
    rng = np.random.default_rng(1)
    z = rng.normal(size=(400, 12, 5))
    y = rng.integers(0, 5, (400, 12))
    y[:, 8:] = -100
    expected = calibkit.calibration_report(z, y, from_logits=True)
    got = calibration_report(da.from_array(z, chunks=(90, 6, 5)), da.from_array(y, chunks=(90, 12)), from_logits=True)
    assert_same(got, expected)


def test_parquet_shards_and_dataframes(client, tmp_path):
    z, y = make(n=9000, k=3, seed=2)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    cuts = [0, 4000, 4000, 4100, 9000]  # an empty file, a small one
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        column = pa.array(list(p[a:b]), type=pa.list_(pa.float32()))
        pq.write_table(pa.table({"probs": column, "labels": y[a:b]}), tmp_path / f"part-{i}.parquet")
    expected = calibkit.calibration_report(p, y)
    got = calibration_report(str(tmp_path / "part-*.parquet"), max_samples=100)
    assert got["partitions"] == 4
    assert_same(got, expected)
    lists = pd.array(list(p), dtype=pd.ArrowDtype(pa.list_(pa.float64())))
    frame = dd.from_pandas(pd.DataFrame({"probs": lists, "labels": y}), npartitions=3)
    assert_same(calibration_report(frame), expected)
    # an object column of arrays, which Dask turns into strings: said, not misread
    strings = dd.from_pandas(pd.DataFrame({"probs": list(p), "labels": y}), npartitions=2)
    with pytest.raises(ValueError, match="holds strings"):
        calibration_report(strings)


def test_bad_input_is_a_clear_error(client, tmp_path):
    z, y = make(n=100)
    with pytest.raises(ValueError, match="no labelled prediction"):
        calibration_report(da.from_array(z, chunks=50), da.from_array(np.full(100, -100), chunks=50))
    with pytest.raises(ValueError, match="`labels` must be a Dask array"):
        calibration_report(da.from_array(z, chunks=50), y)
    with pytest.raises(ValueError, match="needs `labels` of shape"):
        calibration_report(da.from_array(z, chunks=50), da.from_array(y[:, None], chunks=50))
    with pytest.raises(ValueError, match="n_bins"):
        calibration_report(da.from_array(z, chunks=50), da.from_array(y, chunks=50), n_bins=0)
    with pytest.raises(ValueError, match="`data` must be"):
        calibration_report(z, y)
    bad = np.abs(z[:, :3]) / np.abs(z[:, :3]).sum(1, keepdims=True)
    bad[60, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        calibration_report(da.from_array(bad, chunks=50), da.from_array(y % 3, chunks=50))


def test_boolean_masked_arrays_give_the_exact_result(client):
    # x[mask] leaves Dask's chunk sizes unknown (nan): refused before as "shape (nan, 4)"
    z, y = make(n=3000)
    keep = np.random.default_rng(3).uniform(size=3000) < 0.6
    mask = da.from_array(keep, chunks=700)
    got = calibration_report(
        da.from_array(z, chunks=(700, 4))[mask], da.from_array(y, chunks=700)[mask], from_logits=True
    )
    assert_same(got, calibkit.calibration_report(z[keep], y[keep], from_logits=True))
    other = da.from_array(keep, chunks=1000)  # labels masked with other chunks: rows still matched
    got = calibration_report(
        da.from_array(z, chunks=(700, 4))[mask], da.from_array(y, chunks=1000)[other], from_logits=True
    )
    assert_same(got, calibkit.calibration_report(z[keep], y[keep], from_logits=True))


def test_errors_name_the_partition_and_the_row(client, tmp_path):
    z, y = make(n=300)
    y[y == -100] = 0
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    p[237, 1] = np.nan  # row 37 of partition 2
    at = r"NaN or inf at row 37 of partition 2 \(row 237 of all the data\)"
    with pytest.raises(ValueError, match=at):  # raised on a worker process, re-raised here
        calibration_report(da.from_array(p, chunks=(100, 4)), da.from_array(y, chunks=100))
    for i in range(3):
        table = pa.table({"probs": list(p[i * 100 : (i + 1) * 100]), "labels": y[i * 100 : (i + 1) * 100]})
        pq.write_table(table, tmp_path / f"{i}.parquet")
    with pytest.raises(ValueError, match=at):  # a DataFrame's partition sizes are counted when needed
        calibration_report(str(tmp_path / "*.parquet"))
    labels = y.copy()
    labels[150] = 9
    good = np.exp(z) / np.exp(z).sum(1, keepdims=True)  # only the label is bad: one error, whichever worker is first
    with pytest.raises(ValueError, match=r"got 9 at row 50 of partition 1 \(row 150 of all the data\)"):
        calibration_report(da.from_array(good, chunks=(100, 4)), da.from_array(labels, chunks=100))


def test_parquet_paths_are_checked_before_the_cluster_reads_them(client, tmp_path):
    z, y = make(n=200)
    pq.write_table(pa.table({"probs": list(np.full((100, 4), 0.25)), "labels": y[:100] % 4}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"logits": list(z[100:]), "labels": y[100:]}), tmp_path / "b.parquet")
    cases = [
        (str(tmp_path / "*.parquet"), r"b\.parquet holds logits but \S*a\.parquet holds probs"),  # was KeyError
        (str(tmp_path / "missing" / "x.parquet"), "`data`: no such file"),  # was FileNotFoundError
        (str(tmp_path / "zz*.parquet"), r"`data`: no \.parquet"),  # was "no labelled prediction" blaming labels
    ]
    for location, message in cases:
        with pytest.raises(ValueError, match=message):
            calibration_report(location)
    (tmp_path / "b.parquet").unlink()
    np.savez(tmp_path / "c.npz", probs=np.full((3, 4), 0.25), labels=np.zeros(3, int))
    with pytest.raises(ValueError, match=r"c\.npz is not Parquet"):
        calibration_report(str(tmp_path))
    (tmp_path / "c.npz").unlink()
    (tmp_path / "link").symlink_to(tmp_path)  # a loop, and the same file twice: read once
    got = calibration_report(str(tmp_path / "**" / "*.parquet"))
    assert got["n"] == 100 and got["partitions"] == 1


def test_selective_metrics_within_their_bound(client):
    z, y = make(n=8000)
    names = ["aurc", "selective_accuracy"]
    exact = calibkit.calibration_report(z, y, from_logits=True, metrics=names, coverage=0.9)
    got = calibration_report(
        da.from_array(z, chunks=(1500, 4)), da.from_array(y, chunks=1500), from_logits=True, metrics=names, coverage=0.9
    )
    for name in names:
        assert 0 < got[f"{name}_error_bound"] < 5e-3
        assert abs(got[name] - exact[name]) <= got[f"{name}_error_bound"]


def test_multilabel_arrays_and_frames(client, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(9)
    z = (rng.normal(size=(6000, 3)) * 2).astype(np.float32)
    y = (rng.random((6000, 3)) < 1 / (1 + np.exp(-z / 2))).astype(np.float32)
    want = calibkit.calibration_report(z, y, from_logits=True, multilabel=True, metrics=["ece", "brier"])
    got = calibration_report(
        da.from_array(z, chunks=(1700, 3)), da.from_array(y, chunks=(900, 3)), from_logits=True, multilabel=True,
        metrics=["ece", "brier"],
    )  # fmt: skip
    assert got["passes"] == 1
    for avg in ("macro", "micro"):
        assert got[avg] == pytest.approx(want[avg], rel=1e-9)
    np.testing.assert_allclose(got["per_label"]["ece"], want["per_label"]["ece"], rtol=1e-9)
    table = pa.table({"logits": [r.tolist() for r in z], "labels": [r.tolist() for r in y]})
    pq.write_table(table, tmp_path / "ml.parquet", row_group_size=2000)
    from_files = calibration_report(str(tmp_path / "ml.parquet"), multilabel=True, metrics=["ece", "brier"])
    assert from_files["micro"] == pytest.approx(want["micro"], rel=1e-9)
    with pytest.raises(ValueError, match=r"multi-label `probs` and `labels` must both be \(N, K\)"):
        calibration_report(da.from_array(z[:, 0]), da.from_array(y[:, 0]), multilabel=True)
