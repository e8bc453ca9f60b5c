"""Reconciliation: diff streaming results against batch truth and explain every gap."""
