/**
 * The stylesheet every page of the harness starts with (the eval report, and under its own
 * additions every viewer page): type, tables, flags and the report's SVG charts.
 */
export const BASE_CSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#1b1f24;background:#fff}
h1{font-size:1.5rem;margin-bottom:.25rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #d0d7de;padding-bottom:.25rem}
.meta{color:#57606a}
table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
.table-wrap{max-width:100%;overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}
thead th{background:#f6f8fa}
tr.regression td{background:#ffebe9}tr.improvement td{background:#dafbe1}tr.total td{font-weight:600}
.flag-regression{color:#cf222e;font-weight:600}.flag-improvement{color:#1a7f37;font-weight:600}
.warn{background:#fff8c5;border:1px solid #d4a72c;padding:.5rem .75rem;border-radius:4px}
svg{max-width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#1b1f24}
svg .axis{stroke:#8c959f;stroke-width:1}svg .grid{stroke:#eaeef2;stroke-width:1}
svg .bar{fill:#54aeff}svg .bar-previous{fill:#afb8c1}svg .bar-regression{fill:#ff8182}svg .bar-improvement{fill:#4ac26b}
svg .err{stroke:#1b1f24;stroke-width:1.5}
svg .row-regression{fill:#ffebe9}svg .row-improvement{fill:#dafbe1}
`;
