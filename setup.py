"""Everything is in pyproject.toml but one file: `tapt_bench_lm_eval.pth`, installed beside the packages,
whose one line registers the `hf-prompt-once` lm-eval model (harness/scoring/lm_eval_registration.py)."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "tapt_bench_lm_eval.pth"
LINE = "import harness.scoring.lm_eval_registration as _tapt_bench; _tapt_bench.install()\n"


class BuildPy(build_py):
    def run(self):
        super().run()
        # a wheel's root is site-packages; an editable wheel's files go where `install` puts them
        root = Path(
            self.get_finalized_command("install").install_lib if self.editable_mode else self.build_lib
        )
        root.mkdir(parents=True, exist_ok=True)
        (root / PTH).write_text(LINE)


setup(cmdclass={"build_py": BuildPy})
