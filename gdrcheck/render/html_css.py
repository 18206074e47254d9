"""The style sheet of ``gdrcheck report`` (:mod:`gdrcheck.render.html_report`): inline, A4 print rules included."""

from __future__ import annotations

CSS = """
@page { size: A4; margin: 12mm 12mm 14mm; }
* { box-sizing: border-box; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body { font: 13px/1.45 "DejaVu Sans", "Segoe UI", Arial, sans-serif; color: #1d2329; margin: 0 auto;
  padding: 16px 20px; max-width: 1100px; overflow-wrap: anywhere; }
h1 { font-size: 21px; margin: 0; }
h2 { font-size: 16px; border-bottom: 1.5px solid #9aa7b3; padding-bottom: 3px; margin: 22px 0 8px;
  break-after: avoid; page-break-after: avoid; }
h3 { font-size: 13px; margin: 0 0 3px; }
p { margin: 4px 0; }
code, .mono { font-family: "DejaVu Sans Mono", Consolas, monospace; font-size: 0.92em; }
code { background: #eef1f4; padding: 0 3px; border-radius: 3px; }
.sub { color: #5f6b76; margin: 2px 0 10px; }
.muted, .why { color: #5f6b76; }
.why { font-size: 0.9em; }
.unknown { color: #6a3d9a; font-weight: 600; }
.verdict { display: flex; align-items: center; gap: 14px; padding: 8px 12px; border-radius: 6px;
  border: 1px solid rgba(0,0,0,.15); break-inside: avoid; }
.verdict .word { font-size: 20px; font-weight: 800; letter-spacing: .05em; white-space: nowrap; flex-shrink: 0; }
.verdict .line { font-family: "DejaVu Sans Mono", Consolas, monospace; font-size: 12px; }
.verdict .aside { display: block; font-family: "DejaVu Sans", Arial, sans-serif; color: #7a4b00; }
.v-pass, .v-ok { background: #cdebd0; } .v-fail { background: #f6c3bf; } .v-degraded { background: #ffe9a8; }
.v-unknown { background: #e3d7f1; }
.chip { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 0.92em; white-space: nowrap; }
table { border-collapse: collapse; }
table.facts { width: 100%; }
table.facts th { text-align: left; font-weight: 600; width: 10.5em; padding: 2px 10px 2px 0;
  vertical-align: top; color: #34495e; }
table.facts td { padding: 2px 0; }
table.facts tr { border-bottom: 1px solid #eceff2; }
.legend { color: #34495e; font-size: 12px; break-after: avoid; page-break-after: avoid; }
.sw { display: inline-block; width: 14px; height: 10px; border: 1.5px solid #8a97a3; border-radius: 2px;
  margin: 0 3px 0 8px; vertical-align: -1px; }
.sw.k-gpu { background: #e4f4e2; border-color: #2e7d32; } .sw.k-nic { background: #ddf1f6; border-color: #00838f; }
.sw.k-nvme { background: #f3e5f5; border-color: #8e24aa; } .sw.k-nvs { background: #fff4d6; border-color: #c99700; }
.sw.k-sw { background: #e8ecf0; border-color: #455a64; } .sw.k-rp { background: #fff; border-color: #78909c; }
.sw.acs { border: 2.5px solid #c62828; } .sw.low { border: 2px dashed #d97a00; }
.diagram { width: 100%; }
svg.tree { display: block; width: 100%; height: auto; margin: 0 0 6px; break-inside: avoid;
  page-break-inside: avoid; }
svg text { font-family: "DejaVu Sans", Arial, sans-serif; fill: #1d2329; }
svg .t10 { font-size: 10px; } svg .t9 { font-size: 9px; } svg .t8 { font-size: 8px; } svg .b { font-weight: 700; }
svg .muted { fill: #5f6b76; } svg .warn { fill: #b35c00; } svg .bad, svg .acs-t { fill: #c62828; }
svg .acs-t { font-weight: 700; }
.band { fill: #f4f7fa; stroke: #cdd6df; }
.bandlabel { font-size: 11px; font-weight: 700; fill: #34495e; }
.box { fill: #fff; stroke: #8a97a3; stroke-width: 1.2; }
.box.k-root { fill: #fdfdfd; stroke: #607080; }
.box.k-gpu { fill: #e4f4e2; stroke: #2e7d32; } .box.k-nic { fill: #ddf1f6; stroke: #00838f; }
.box.k-nvme { fill: #f3e5f5; stroke: #8e24aa; } .box.k-nvs { fill: #fff4d6; stroke: #c99700; }
.box.k-sw { fill: #e8ecf0; stroke: #455a64; } .box.k-rp { fill: #fff; stroke: #78909c; }
.box.low { stroke: #d97a00; stroke-dasharray: 5 2; stroke-width: 1.8; }
.box.acs { stroke: #c62828; stroke-width: 2.6; stroke-dasharray: none; }
.box.ghost { stroke-dasharray: 3 3; }
.edge { fill: none; stroke: #7b8894; stroke-width: 1.2; }
.edge.low { stroke: #d97a00; stroke-dasharray: 5 3; stroke-width: 1.8; }
.edge.acs { stroke: #c62828; stroke-width: 2.2; }
.note { font-size: 12px; color: #5f6b76; }
table.m { margin: 6px 0 12px; }
h3.mcap { margin: 10px 0 2px; break-after: avoid; page-break-after: avoid; }
.key { white-space: nowrap; }
table.m th, table.m td { border: 1px solid #fff; padding: 1px 3px; text-align: center; min-width: 3.7em;
  font: 11px/1.35 "DejaVu Sans Mono", Consolas, monospace; white-space: nowrap; overflow-wrap: normal; }
table.m thead th { background: #e8ecf0; }
table.m th.row { text-align: left; background: #e8ecf0; min-width: 4.5em; }
table.m td.self { color: #9aa7b3; } table.m td.none { background: #f7f8fa; }
table.m td.unused, .chip.unused { color: #6b7785; background: #f1f3f5; }
ul.capabilities { margin: .4em 0 0; padding-left: 1.2em; }
table.m td.numa, table.m th.numa { min-width: 0; color: #5f6b76; background: none; }
table.m thead { display: table-header-group; }
table.m tr, table.devices tr, table.bar1 tr { break-inside: avoid; page-break-inside: avoid; }
table.devices { margin: 6px 0 4px; font-size: 12px; }
table.devices th, table.devices td { text-align: left; padding: 1px 10px 1px 0; border-bottom: 1px solid #eceff2; }
table.devices th, td.mono, table.bar1 th { white-space: nowrap; overflow-wrap: normal; }
table.bar1 td { overflow-wrap: normal; } table.bar1 td.gname { white-space: nowrap; }
table.bar1 { width: 100%; font-size: 12px; }
table.bar1 th, table.bar1 td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid #eceff2; }
.barcell { width: 32%; }
.bar { display: block; height: 12px; background: #dfe6ec; border: 1px solid #9aa7b3; border-radius: 2px;
  position: relative; overflow: hidden; }
.bar .used { display: block; height: 100%; background: #3b6e96; }
.bar.high .used { background: #c62828; }
.bar .nouse { display: block; height: 100%; background: repeating-linear-gradient(45deg, #dfe6ec 0 4px,
  #c4ced8 4px 8px); }
.bar.none { background: #f7f8fa; border-style: dashed; }
.finding { border-left: 5px solid #9aa7b3; padding: 4px 10px 6px; margin: 8px 0; background: #fafbfc;
  break-inside: avoid; page-break-inside: avoid; }
.finding.s-error { border-color: #c62828; } .finding.s-warning { border-color: #d97a00; }
.finding.s-info { border-color: #1e78b4; }
.finding .sev { font-size: 11px; letter-spacing: .04em; }
.s-error .sev { color: #c62828; } .s-warning .sev { color: #b35c00; } .s-info .sev { color: #1e78b4; }
.finding .name { font-weight: 400; color: #34495e; }
.finding .origin { font-weight: 400; font-size: 11px; color: #5f6b76; border: 1px solid #cdd6df;
  border-radius: 8px; padding: 0 6px; }
.finding .title { font-weight: 600; }
.finding ul { margin: 3px 0 4px; padding-left: 18px; }
.finding .fix { background: #eef6ee; padding: 3px 6px; border-radius: 3px; }
footer code { white-space: nowrap; }
footer { margin-top: 24px; font-size: 11px; color: #5f6b76; border-top: 1px solid #cdd6df; padding-top: 4px; }
@media print {
  body { padding: 0; max-width: none; font-size: 9.5pt; }
  h2 { margin-top: 14px; }
  .verdict { border-width: 2px; }
}
"""
