"""Run reports: the HTML page with its SVG timeline, the text failure story, publishing a run."""
