"""Renderers: the console table, the JSON/CSV document, the HTML report and its charts, the annotated graph,
CI formats (SARIF, JUnit, GitHub), and the views of diffs, sweeps, comparisons and measurements. The only
package besides the CLI that formats for people.
"""
