"""`wirelog report`: the page (page.py) of the data the core aggregated (data.py, charts.py)."""
