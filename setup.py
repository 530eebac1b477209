"""Everything is in pyproject.toml but one file: `tapt_bench_lm_eval.pth`, installed beside the packages,
whose one line registers the `hf-prompt-once` lm-eval model (harness/scoring/lm_eval_registration.py)."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "tapt_bench_lm_eval.pth"
# A .pth runs a line that starts with `import`; the try keeps start-up quiet where another `harness`
# shadows ours (then the model is simply not registered).
TRY = (
    "try:\n from harness.scoring.lm_eval_registration import install\n install()\nexcept ImportError:\n pass"
)
LINE = f"import sys; exec({TRY!r})\n"


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
