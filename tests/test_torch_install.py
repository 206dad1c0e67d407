"""Which PyTorch build a new environment gets (greenlab/base/torch_install.py, run by make)."""

import subprocess
import sys
from pathlib import Path

import pytest

from greenlab.base import torch_install
from greenlab.base.torch_install import CPU_INDEX, plan

ROOT = Path(__file__).resolve().parents[1]


def _never():
    raise AssertionError("the CPU index must not be asked here")


def test_no_nvidia_driver_installs_the_cpu_build_with_the_pins():
    decision = plan("py", "constraints.txt", "Linux", "x86_64", driver=False, installed=False, reachable=lambda: True)
    assert decision.command == ["py", "-m", "pip", "install", "-c", "constraints.txt", "torch", "torchvision",
                                "--index-url", CPU_INDEX]
    assert "CPU build" in decision.message


def test_an_nvidia_driver_keeps_the_default_cuda_wheel_without_asking_the_index():
    decision = plan("py", None, "Linux", "x86_64", driver=True, installed=False, reachable=_never)
    assert decision.command is None and "NVIDIA driver found" in decision.message


def test_an_unreachable_index_falls_back_to_the_default_wheel_in_one_line():
    decision = plan("py", None, "Linux", "x86_64", driver=False, installed=False, reachable=lambda: False)
    assert decision.command is None
    assert "could not be reached" in decision.message and "\n" not in decision.message


@pytest.mark.parametrize("system, machine", [("Darwin", "arm64"), ("Windows", "AMD64"), ("Linux", "aarch64")])
def test_platforms_whose_default_wheel_has_no_cuda_are_left_alone(system, machine):
    decision = plan("py", None, system, machine, driver=False, installed=False, reachable=_never)
    assert decision.command is None and "has no CUDA" in decision.message


def test_an_installed_torch_is_kept():
    decision = plan("py", None, "Linux", "x86_64", driver=False, installed=True, reachable=_never)
    assert decision.command is None and "keeping" in decision.message


def test_driver_detection_reads_the_driver_file(tmp_path, monkeypatch):
    monkeypatch.setattr(torch_install.shutil, "which", lambda name: None)
    assert not torch_install.nvidia_driver_present(str(tmp_path / "absent"))
    (tmp_path / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15\n")
    assert torch_install.nvidia_driver_present(str(tmp_path / "version"))


def test_an_unreachable_address_is_reported_as_unreachable_quickly():
    assert torch_install.index_reachable("http://127.0.0.1:9", timeout_s=2.0) is False


def test_it_runs_as_a_plain_script_before_greenlab_can_be_imported():
    """make runs it with the new venv's Python before torch is installed: it must import no
    greenlab module (greenlab itself imports torch)."""
    done = subprocess.run([sys.executable, "-S", "-c", "import ast, sys; tree = ast.parse(open(sys.argv[1]).read()); "
                           "mods = [n.module or '' for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + "
                           "[a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]; "
                           "print(','.join(mods))", str(ROOT / "greenlab" / "base" / "torch_install.py")],
                          capture_output=True, text=True, check=True)
    assert not [m for m in done.stdout.strip().split(",") if m.startswith("greenlab")]


def test_the_makefile_runs_it_before_the_install():
    text = (ROOT / "Makefile").read_text()
    assert text.index("greenlab/base/torch_install.py") < text.index("-e '.[$(MAKE_EXTRAS)")
