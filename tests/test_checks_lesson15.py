"""Lesson 15's exercises: gl.check.fedavg_aggregate and gl.check.round_bytes pass a correct answer
written another way and fail each typical mistake with its own hint."""

import torch

from greenlab.course import checks


def details(result):
    return " ".join(result.details)


# --- FedAvg's aggregation ----------------------------------------------------------------------

def mine(states, counts, weights=None, keys=None):
    """FedAvg written with torch.stack over the clients, one key at a time."""
    total = float(sum(counts))
    w = [n / total for n in counts] if weights is None else weights
    out = {}
    for key in states[0]:
        if keys is not None and key not in keys:
            out[key] = states[0][key].clone()
            continue
        stacked = torch.stack([s[key].to(torch.float64) for s in states])
        mixed = (stacked * torch.tensor(w, dtype=torch.float64).view(-1, *[1] * (stacked.dim() - 1))).sum(0)
        dtype = states[0][key].dtype
        out[key] = mixed.to(dtype) if dtype.is_floating_point else mixed.round().to(dtype)
    return out


def test_a_correct_fedavg_written_differently_passes():
    result = checks.fedavg_aggregate(mine)
    assert result.passed, result.text()


def test_an_unweighted_mean_fails_with_its_hint():
    result = checks.fedavg_aggregate(lambda s, n: mine(s, n, weights=[1 / len(s)] * len(s)))
    assert result.status == checks.FAILED and "a plain mean" in details(result)


def test_a_weighted_sum_without_normalising_fails_with_its_hint():
    result = checks.fedavg_aggregate(lambda s, n: mine(s, n, weights=[float(k) for k in n]))
    assert result.status == checks.FAILED and "divide by the total number of samples" in details(result)


def test_normalising_by_the_number_of_clients_fails_with_its_hint():
    result = checks.fedavg_aggregate(lambda s, n: mine(s, n, weights=[k / len(s) for k in n]))
    assert result.status == checks.FAILED and "not by the number of clients" in details(result)


def test_averaging_only_the_parameters_fails_with_its_hint():
    def params_only(states, counts):
        keep = [k for k in states[0] if k.endswith(("weight", "bias"))]
        return mine(states, counts, keys=keep)

    result = checks.fedavg_aggregate(params_only)
    assert result.status == checks.FAILED and "buffers too" in details(result)


def test_a_missing_key_and_a_wrong_dtype_are_named():
    result = checks.fedavg_aggregate(lambda s, n: {k: v for k, v in mine(s, n).items() if "head" not in k})
    assert result.status == checks.FAILED and "lacks ['head.weight']" in details(result)
    result = checks.fedavg_aggregate(lambda s, n: {k: v.double() for k, v in mine(s, n).items()})
    assert result.status == checks.FAILED and "dtype" in details(result)


def test_fedavg_stub_and_errors_never_raise():
    assert checks.fedavg_aggregate(None).status == checks.NOT_ATTEMPTED
    assert checks.fedavg_aggregate(lambda s, n: None).status == checks.NOT_ATTEMPTED

    def broken(states, counts):
        raise RuntimeError("boom")

    result = checks.fedavg_aggregate(broken)
    assert result.status == checks.FAILED and "boom" in details(result)


# --- bytes per round ------------------------------------------------------------------------------

def my_round_bytes(state, n_clients, directions=2, size=None, only=None):
    total = 0
    for key, t in state.items():
        if only is not None and key not in only:
            continue
        total += t.numel() * (t.element_size() if size is None else size)
    return directions * n_clients * total


def test_correct_round_bytes_written_differently_passes():
    result = checks.round_bytes(my_round_bytes)
    assert result.passed, result.text()


def test_counting_one_direction_fails_with_its_hint():
    result = checks.round_bytes(lambda s, n: my_round_bytes(s, n, directions=1))
    assert result.status == checks.FAILED and "two transfers per client" in details(result)


def test_counting_elements_fails_with_its_hint():
    result = checks.round_bytes(lambda s, n: my_round_bytes(s, n, size=1))
    assert result.status == checks.FAILED and "count bytes, not elements" in details(result)


def test_assuming_float32_fails_with_its_hint():
    result = checks.round_bytes(lambda s, n: my_round_bytes(s, n, size=4))
    assert result.status == checks.FAILED and "own element size" in details(result)


def test_leaving_out_buffers_fails_with_its_hint():
    result = checks.round_bytes(lambda s, n: my_round_bytes(s, n, only=("weight", "bias")))
    assert result.status == checks.FAILED and "buffers are sent too" in details(result)


def test_round_bytes_stub_is_not_attempted():
    assert checks.round_bytes(None).status == checks.NOT_ATTEMPTED
    assert checks.round_bytes(lambda s, n: None).status == checks.NOT_ATTEMPTED
