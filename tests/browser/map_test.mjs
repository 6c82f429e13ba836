// The live map (/map) in Debian's chromium, headless, driven by playwright-core (web/
// node_modules, scripts/web.sh), against a running trackd. Run by tests/integration/
// map_browser_test.cpp, which starts trackd with the simulated fleet, and moves a vehicle when
// this script asks for it (the file handshake below).
//
//   node map_test.mjs --url URL --token READ_TOKEN --out DIR --vehicle ID --to LON,LAT
//                     --bounds W,S,E,N
//
// Steps: log in as a user would (the token typed into the form); at --bounds, the vehicles
// drawn are the ones the API reports there; ask for the move (DIR/ready-to-move, then wait
// for DIR/moved) and wait until --vehicle is drawn at --to; click it: the details show its
// latest position and last hour's track as the API has them; the ticker shows its entering
// the zone at --to; screenshot DIR/map.png. Prints one line "RESULT {json}"; exits 1 on a
// failed check.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { chromium } = await import(
  new URL('../../web/node_modules/playwright-core/index.mjs', import.meta.url));

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];
for (const k of ['url', 'token', 'out', 'vehicle', 'to', 'bounds']) {
  if (!args[k]) throw new Error(`--${k} is required`);
}
const [toLon, toLat] = args.to.split(',').map(Number);
const [west, south, east, north] = args.bounds.split(',').map(Number);
const WAIT_MS = 30000;  // longest wait for anything the page should do by itself
fs.mkdirSync(args.out, { recursive: true });

const result = { checks: [] };
let failed = false;
function check(name, ok, detail) {
  result.checks.push({ name, ok, detail });
  console.log(`map-test: ${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? `: ${JSON.stringify(detail)}` : ''}`);
  if (!ok) failed = true;
}

async function api(p) {
  const res = await fetch(args.url + p, { headers: { Authorization: `Bearer ${args.token}` } });
  if (!res.ok) throw new Error(`${p}: HTTP ${res.status}`);
  return res.json();
}

async function until(what, fn, timeoutMs = WAIT_MS) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return { value: v, ms: Date.now() - t0 };
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'trackd-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1200, height: 800 },
  args: ['--no-sandbox', '--headless', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const page = context.pages()[0] || await context.newPage();
const consoleErrors = [];
page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
page.on('pageerror', (e) => consoleErrors.push(String(e)));
const foreign = [];
page.on('request', (r) => { if (!r.url().startsWith(args.url) && !r.url().startsWith('blob:')
  && !r.url().startsWith('data:')) foreign.push(r.url()); });
const tokenInUrl = [];
page.on('request', (r) => { if (r.url().includes(args.token)) tokenInUrl.push(r.url()); });

try {
  await page.goto(`${args.url}/map`);
  // A wrong token is refused at the form; the right one opens the map.
  await page.fill('#token', 'not-a-token-0123456789');
  await page.click('#login button');
  await page.waitForFunction(() => document.getElementById('login-error').textContent !== '');
  check('a wrong token is refused', await page.isVisible('#login'),
    await page.textContent('#login-error'));
  consoleErrors.length = 0;  // the browser logs the refused request (401) as an error
  await page.fill('#token', args.token);
  await page.click('#login button');
  await page.waitForFunction(() => window.map && window.map.loaded(), null, { timeout: WAIT_MS });
  check('the token is kept in sessionStorage only',
    await page.evaluate(() => sessionStorage.getItem('trackd.token') !== null
      && localStorage.length === 0 && !document.cookie));

  // The viewport, then what is drawn in it against what the API says is there.
  await page.evaluate(([w, s, e, n]) => window.map.fitBounds([[w, s], [e, n]],
    { animate: false, padding: 0 }), [west, south, east, north]);
  const inView = async () => page.evaluate(() => new Promise((resolve) => {
    const m = window.map;
    const collect = () => {
      const b = m.getBounds();
      const ids = {};
      for (const f of m.queryRenderedFeatures({ layers: ['vehicles'] })) {
        const c = f.geometry.coordinates;
        if (b.contains(c)) ids[f.properties.vehicle_id] = c;
      }
      resolve({ bounds: [b.getWest(), b.getSouth(), b.getEast(), b.getNorth()], ids,
        zoom: m.getZoom(), label: document.getElementById('count').textContent });
    };
    if (m.loaded() && m.areTilesLoaded()) collect(); else m.once('idle', collect);
  }));
  await page.waitForFunction(() => window.map.areTilesLoaded(), null, { timeout: WAIT_MS });
  const view = await inView();
  const [bw, bs, be, bn] = view.bounds;
  const listed = await api(`/v1/vehicles?bbox=${bw},${bs},${be},${bn}&limit=10000`);
  const apiIds = Object.fromEntries(listed.features.map((f) => [f.id, f.geometry.coordinates]));
  // A tile holds positions to 1/4096 of its width: a vehicle closer than that to the viewport's
  // edge may be drawn on the other side of it. Such vehicles are reported, not counted.
  const tileZoom = Math.min(14, Math.floor(view.zoom));
  const quantumDeg = 360 / 2 ** tileZoom / 4096;
  const nearEdge = ([lon, lat]) => Math.min(Math.abs(lon - bw), Math.abs(lon - be),
    Math.abs(lat - bs), Math.abs(lat - bn)) < 2 * quantumDeg;
  const drawnSet = new Set(Object.keys(view.ids));
  const apiSet = new Set(Object.keys(apiIds));
  const differ = [...new Set([...drawnSet, ...apiSet])].filter((id) => drawnSet.has(id) !== apiSet.has(id));
  const unexplained = differ.filter((id) => !nearEdge(apiIds[id] || view.ids[id]));
  result.api_in_view = apiSet.size;
  result.drawn_in_view = drawnSet.size;
  result.near_edge = differ;
  check('the map draws the vehicles the API reports in the viewport',
    unexplained.length === 0 && apiSet.size > 0,
    { api: apiSet.size, drawn: drawnSet.size, differ, unexplained });
  check('the page says how many it draws', view.label === `${drawnSet.size} vehicles in view`,
    view.label);

  // Show both the vehicle's old place and the new one, then ask for the move.
  const before = (await api(`/v1/vehicles/${encodeURIComponent(args.vehicle)}`)).geometry.coordinates;
  await page.evaluate(([a, b]) => window.map.fitBounds([[Math.min(a[0], b[0]), Math.min(a[1], b[1])],
    [Math.max(a[0], b[0]), Math.max(a[1], b[1])]], { animate: false, padding: 80 }),
    [before, [toLon, toLat]]);
  const drawnAt = async () => page.evaluate((id) => {
    const f = window.map.queryRenderedFeatures({ layers: ['vehicles'], filter: ['==', ['get', 'vehicle_id'], id] });
    return f.length ? f[0].geometry.coordinates : null;
  }, args.vehicle);
  const old = (await until('the vehicle drawn at its old place', drawnAt)).value;
  check('the vehicle is drawn at its old place first',
    Math.abs(old[0] - before[0]) < 0.001 && Math.abs(old[1] - before[1]) < 0.001, { old, before });
  fs.writeFileSync(path.join(args.out, 'ready-to-move'), '');
  await until('the move (the test writes DIR/moved)',
    () => fs.existsSync(path.join(args.out, 'moved')), 60000);
  const moved = await until('the vehicle redrawn at its new place', async () => {
    const c = await drawnAt();
    return c && Math.abs(c[0] - toLon) < 0.001 && Math.abs(c[1] - toLat) < 0.001 ? c : null;
  });
  result.redrawn_after_ms = moved.ms;
  check('the moved vehicle is redrawn at its new place', true, { at: moved.value, ms: moved.ms });

  // Click it: its details and its last hour.
  const px = await page.evaluate((c) => { const p = window.map.project(c); return [p.x, p.y]; },
    moved.value);
  await page.mouse.click(px[0], px[1]);
  await page.waitForSelector('#details:not([hidden])', { timeout: WAIT_MS });
  const latest = await api(`/v1/vehicles/${encodeURIComponent(args.vehicle)}`);
  await page.waitForFunction((t) => document.getElementById('detail-time').textContent === t,
    latest.properties.last_updated, { timeout: WAIT_MS });
  const shown = await page.evaluate(() => ({
    id: document.getElementById('detail-id').textContent,
    position: document.getElementById('detail-position').textContent,
    time: document.getElementById('detail-time').textContent,
    track: document.getElementById('detail-track').textContent,
    trackDrawn: window.map.querySourceFeatures('track').length,
  }));
  const [llon, llat] = latest.geometry.coordinates;
  check('the click shows the vehicle and its latest position',
    shown.id === args.vehicle && shown.position === `${llat.toFixed(5)}, ${llon.toFixed(5)}`
      && shown.time === latest.properties.last_updated, shown);
  const hour = await api(`/v1/vehicles/${encodeURIComponent(args.vehicle)}/track?from=${
    encodeURIComponent(new Date(Date.now() - 3600e3).toISOString())}`);
  check('the click shows the last hour\'s track', shown.track.startsWith(`${hour.properties.points} positions`)
    && hour.properties.points >= 2 && shown.trackDrawn > 0, { shown: shown.track, api: hour.properties.points });

  // The ticker: the vehicle entered the zone at its new place.
  const ticker = await until('the ticker line', () => page.evaluate((id) =>
    [...document.querySelectorAll('#ticker li')].map((li) => li.textContent)
      .find((t) => t.includes(`${id} entered`)) || null, args.vehicle));
  check('the ticker shows the geofence event', true, ticker.value);

  await page.screenshot({ path: path.join(args.out, 'map.png') });
  check('no request left this trackd', foreign.length === 0, foreign);
  check('the token never went into a URL', tokenInUrl.length === 0, tokenInUrl);
  check('no error on the page', consoleErrors.length === 0, consoleErrors);
} catch (err) {
  check('the page did what it should', false, String(err && err.stack || err));
  await page.screenshot({ path: path.join(args.out, 'map-failed.png') }).catch(() => {});
} finally {
  await context.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
console.log(`RESULT ${JSON.stringify(result)}`);
process.exit(failed ? 1 : 0);
