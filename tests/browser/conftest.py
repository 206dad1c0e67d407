"""The notebooks here are fixtures that tests/test_browser.py opens in JupyterLab; nbval must not
run them as lessons (interrupt.ipynb trains until it is interrupted)."""

collect_ignore_glob = ["*.ipynb"]
