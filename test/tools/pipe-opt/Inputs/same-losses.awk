# Lines "step K/N: loss A (...)<TAB>step K/N: loss B (...)" (two runs pasted side by
# side): exit 0 when there is at least one and every A equals B to 1e-5 relative.
{
  a = $4; b = 0
  for (i = 5; i <= NF; ++i)
    if ($i == "loss") { b = $(i + 1); break }
  d = a - b; if (d < 0) d = -d
  m = a < 0 ? -a : a
  if (i > NF || d > 1e-5 * m) bad = 1
  ++lines
}
END { exit (lines > 0 && !bad) ? 0 : 1 }
