// Run by headless Chromium inside a copy of a report page: measures every chart as the browser laid it out, with
// the fonts it really has, and writes what it finds into a pre element (id layout-check) for the test to read from the
// dumped DOM. Problems: a table wider than the page, two legend entries overlapping, a legend entry over a data mark (point, line, column,
// band or clipped-point marker), text that runs past any edge of the chart (rotated text included: it is
// measured as drawn, on the page), and tick labels drawn under 10 px tall.
(function () {
  const problems = [];
  const meet = (a, b) =>
    a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
  let charts = 0;
  for (const svg of document.querySelectorAll('svg.chart')) {
    charts++;
    const title = (svg.querySelector('.title') || {}).textContent || '?';
    const legends = [...svg.querySelectorAll('g.legend')].map((g) => g.getBBox());
    for (let i = 0; i < legends.length; i++)
      for (let j = i + 1; j < legends.length; j++)
        if (meet(legends[i], legends[j])) problems.push(`${title}: legend entries ${i} and ${j} overlap`);
    const marks = [
      ...svg.querySelectorAll('g.series circle, g.series polyline, rect.column, path.clipped, rect.band'),
    ].map((e) => e.getBBox());
    legends.forEach((l, i) => {
      if (marks.some((m) => meet(l, m))) problems.push(`${title}: legend entry ${i} covers data`);
    });
    const edge = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      const b = t.getBoundingClientRect();
      if (b.left < edge.left - 0.5 || b.right > edge.right + 0.5 || b.top < edge.top - 0.5 || b.bottom > edge.bottom + 0.5)
        problems.push(`${title}: text '${t.textContent}' is cut off at the chart's edge`);
    }
    // Charts scale with their box: a box too narrow (two charts a row in the page's width) shrinks the ticks
    // past reading.
    const scale = svg.getScreenCTM() ? svg.getScreenCTM().a : 1;
    for (const t of svg.querySelectorAll('text.tick')) {
      const px = parseFloat(getComputedStyle(t).fontSize) * scale;
      if (px < 10) problems.push(`${title}: tick '${t.textContent}' is drawn at ${px.toFixed(1)} px, under 10 px`);
    }
  }
  // A table wider than its box scrolls sideways on screen and loses its right-hand columns on paper.
  for (const box of document.querySelectorAll('.scroll, .wide')) {
    if (box.scrollWidth > box.clientWidth + 1) {
      const section = box.closest('section');
      const where = section ? section.id : 'header';
      problems.push(`table in ${where}: ${box.scrollWidth} px wide in a ${box.clientWidth} px page`);
    }
  }
  const pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = JSON.stringify({ charts, problems });
  document.body.appendChild(pre);
})();
