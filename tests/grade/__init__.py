"""Grading: reading answers, grading and its rules, carried credit, copies, audit, feedback, reports."""
