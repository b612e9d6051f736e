"""Real-browser helpers: headless Chromium driven by Selenium (see chromium.py)."""
