"""Lambda-Kappa Lab: run Lambda and Kappa side by side on one event log and measure the gap."""

__version__ = "0.1.0"
