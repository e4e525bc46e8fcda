"""Gradio widget of calibkit's `conformal_sets` metric: a Hugging Face Space runs this file."""

from pathlib import Path

import evaluate
from evaluate.utils import launch_gradio_widget

# The script next to this file, by path: always calibkit's, without a Hub look-up.
module = evaluate.load(str(Path(__file__).with_name("conformal_sets.py")))
launch_gradio_widget(module)
