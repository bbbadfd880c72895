"""The bundled traces: loadable, consistent with the source, and rebuildable from it."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from adaserve.workload.trace import compact, load_trace

SOURCE = Path(__file__).resolve().parents[3] / "shared" / "traces"


@pytest.mark.parametrize("name,rows", [("conv", 19366), ("code", 8819)])
def test_bundled_trace_loads(name: str, rows: int) -> None:
    t = load_trace(name)
    assert len(t) == rows and t.t_us[0] == 0 and np.all(np.diff(t.t_us) >= 0)
    assert t.context_tokens.min() >= 0 and t.generated_tokens.min() >= 0
    assert 3000 < t.t_us[-1] / 1e6 < 3600  # about an hour
    assert t.mean_rate > 0 and len(t.gaps_s) == rows - 1


def test_unknown_trace() -> None:
    with pytest.raises(ValueError, match="unknown trace"):
        load_trace("twitter")


def test_compact_round_trips_a_source_file(tmp_path: Path) -> None:
    src = tmp_path / "t.csv"
    src.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                   "2023-11-16 23:59:59.9999990,10,2\n2023-11-17 00:00:00.0000010,7,3\n")
    out = tmp_path / "t.csv.gz"
    assert compact(src, out) == 2
    assert gzip.open(out, "rt").read() == "t_us,context_tokens,generated_tokens\n0,10,2\n2,7,3\n"


@pytest.mark.skipif(not (SOURCE / "AzureLLMInferenceTrace_code.csv").exists(), reason="source traces not here")
def test_bundled_file_is_the_compacted_source(tmp_path: Path) -> None:
    compact(SOURCE / "AzureLLMInferenceTrace_code.csv", tmp_path / "c.csv.gz")
    bundled = Path(__file__).resolve().parents[2] / "workload" / "traces" / "azure_code_2023.csv.gz"
    # compare contents: compressed bytes may differ between zlib builds
    assert gzip.decompress((tmp_path / "c.csv.gz").read_bytes()) == gzip.decompress(bundled.read_bytes())


def test_an_unknown_trace_name_is_a_user_error_that_says_what_exists() -> None:
    from adaserve.broker.errors import ConfigError, InvalidArgument

    with pytest.raises(InvalidArgument) as exc:
        load_trace("twitter")
    assert isinstance(exc.value, ConfigError)  # a CLI prints it as one line, exit code 2
    assert str(exc.value) == "unknown trace 'twitter' (bundled: conv, code)"


def test_a_file_that_is_no_azure_trace_is_a_data_error(tmp_path: Path) -> None:
    from adaserve.broker.errors import DataError

    src = tmp_path / "t.csv"
    src.write_text("time,tokens\n1,2\n")
    with pytest.raises(DataError, match="is not an Azure LLM inference trace"):
        compact(src, tmp_path / "t.csv.gz")
