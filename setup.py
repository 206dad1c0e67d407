"""Build step that pyproject.toml cannot express: the learner copies of the lessons and the recorded
GPU runs travel inside the package (``greenlab/lessons/``, ``greenlab/data/reference_runs/``), so
``greenlab lab`` and the lessons' "What it means on a real GPU" sections work from a wheel, far from
a checkout (``greenlab.base.paths``). Everything else about the package is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# folder of the checkout -> the same path inside the package, and the files of it that ship
SHIPPED = {"lessons": "*.ipynb", "data/reference_runs": "*.*"}


class BuildWithCourseFiles(build_py):
    """setuptools' build_py, then the lessons and recorded runs copied into the built package."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout's own folders
            return
        for folder, pattern in SHIPPED.items():
            for path in sorted((HERE / folder).glob(pattern)):
                if path.is_file():
                    target = Path(self.build_lib) / "greenlab" / folder / path.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target)


setup(cmdclass={"build_py": BuildWithCourseFiles})
