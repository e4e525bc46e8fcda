"""The papers behind the metrics: BibTeX by key, which :class:`~calibkit.metrics.registry.Metric` entries cite."""

PAPERS: dict[str, str] = {
    "guo2017": """@inproceedings{guo2017calibration,
  title     = {On Calibration of Modern Neural Networks},
  author    = {Guo, Chuan and Pleiss, Geoff and Sun, Yu and Weinberger, Kilian Q.},
  booktitle = {Proceedings of the 34th International Conference on Machine Learning},
  pages     = {1321--1330},
  year      = {2017}
}""",
    "naeini2015": """@inproceedings{naeini2015obtaining,
  title     = {Obtaining Well Calibrated Probabilities Using {Bayesian} Binning},
  author    = {Naeini, Mahdi Pakdaman and Cooper, Gregory F. and Hauskrecht, Milos},
  booktitle = {Proceedings of the Twenty-Ninth AAAI Conference on Artificial Intelligence},
  pages     = {2901--2907},
  year      = {2015}
}""",
    "nixon2019": """@inproceedings{nixon2019measuring,
  title     = {Measuring Calibration in Deep Learning},
  author    = {Nixon, Jeremy and Dusenberry, Michael W. and Zhang, Linchuan and Jerfel, Ghassen and Tran, Dustin},
  booktitle = {CVPR Workshops},
  year      = {2019}
}""",
    "obadinma2021": """@inproceedings{obadinma2021classwise,
  title     = {Class-wise Calibration: A Case Study on {COVID}-19 Hate Speech},
  author    = {Obadinma, Stephen and Guo, Hongyu and Zhu, Xiaodan},
  booktitle = {Proceedings of the Canadian Conference on Artificial Intelligence},
  year      = {2021}
}""",
    "dawkins2022": """@inproceedings{dawkins2022region,
  title     = {Region-dependent temperature scaling for certainty calibration and application to
               class-imbalanced token classification},
  author    = {Dawkins, Hillary and Nejadgholi, Isar},
  booktitle = {Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics},
  year      = {2022}
}""",
    "bihani2023": """@misc{bihani2023fuzzy,
  title  = {Calibration Error Estimation Using Fuzzy Binning},
  author = {Bihani, Geetanjali and Rayz, Julia Taylor},
  year   = {2023},
  note   = {Code: https://github.com/bihani-g/fce}
}""",
    "sumler2025": """@misc{sumler2025entropic,
  title  = {An Entropic Metric for Measuring Calibration of Machine Learning Models},
  author = {Sumler, Daniel James and Devlin, Lee and Maskell, Simon and Lane, Richard O.},
  year   = {2025}
}""",
    "brier1950": """@article{brier1950verification,
  title   = {Verification of Forecasts Expressed in Terms of Probability},
  author  = {Brier, Glenn W.},
  journal = {Monthly Weather Review},
  volume  = {78},
  number  = {1},
  pages   = {1--3},
  year    = {1950}
}""",
    "galdran": """@misc{galdran2023calibration,
  title  = {Part {III}: Model Calibration (tutorial slides)},
  author = {Galdran, Adrian and Riera i Marin, Meritxell}
}""",
    "kumar2019": """@inproceedings{kumar2019verified,
  title     = {Verified Uncertainty Calibration},
  author    = {Kumar, Ananya and Liang, Percy and Ma, Tengyu},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {32},
  year      = {2019}
}""",
    "geifman2017": """@inproceedings{geifman2017selective,
  title     = {Selective Classification for Deep Neural Networks},
  author    = {Geifman, Yonatan and El-Yaniv, Ran},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {30},
  year      = {2017}
}""",
    "liang2023": """@article{liang2023holistic,
  title   = {Holistic Evaluation of Language Models},
  author  = {Liang, Percy and Bommasani, Rishi and Lee, Tony and others},
  journal = {Transactions on Machine Learning Research},
  year    = {2023}
}""",
    "blasiok2024": """@inproceedings{blasiok2024smooth,
  title     = {Smooth {ECE}: Principled Reliability Diagrams via Kernel Smoothing},
  author    = {Blasiok, Jaroslaw and Nakkiran, Preetum},
  booktitle = {The Twelfth International Conference on Learning Representations},
  year      = {2024}
}""",
    "sadinle2019": """@article{sadinle2019least,
  title     = {Least Ambiguous Set-Valued Classifiers with Bounded Error Levels},
  author    = {Sadinle, Mauricio and Lei, Jing and Wasserman, Larry},
  journal   = {Journal of the American Statistical Association},
  volume    = {114},
  number    = {525},
  pages     = {223--234},
  year      = {2019}
}""",
    "romano2020": """@inproceedings{romano2020classification,
  title     = {Classification with Valid and Adaptive Coverage},
  author    = {Romano, Yaniv and Sesia, Matteo and Cand{\\`e}s, Emmanuel},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {33},
  pages     = {3581--3591},
  year      = {2020}
}""",
    "angelopoulos2021": """@inproceedings{angelopoulos2021uncertainty,
  title     = {Uncertainty Sets for Image Classifiers using Conformal Prediction},
  author    = {Angelopoulos, Anastasios Nikolas and Bates, Stephen and Malik, Jitendra and Jordan, Michael I.},
  booktitle = {International Conference on Learning Representations},
  year      = {2021}
}""",
}
"""BibTeX of every paper a metric cites, by key (``Metric.papers``); the ``evaluate`` modules' ``_CITATION``."""
