// trackd's live map (/map): vehicles and geofences as vector tiles from this trackd, a click shows
// a vehicle's latest position and its last hour, and a ticker shows geofence events as they are
// committed. Served by trackd itself with MapLibre GL JS vendored into the binary: no request
// leaves this origin, there is no base map (a plain background).
//
// The token: asked for once, kept in sessionStorage (this tab only, gone when it closes) and sent
// as "Authorization: Bearer" on every request: MapLibre's transformRequest adds it to tile
// requests, and the event ticker reads the Server-Sent Events stream with fetch() (EventSource
// cannot send headers). It never goes into a URL.
import { Map as MapLibreMap } from '/map/maplibre-gl.mjs';

const TOKEN_KEY = 'trackd.token';
const REFRESH_MS = 2000;      // vehicles tiles are revalidated this often (ETag: 304 if unchanged)
const GEOFENCE_REFRESH_MS = 60000;
const TICKER_MAX = 50;
const origin = window.location.origin;
const $ = (id) => document.getElementById(id);

function tiles(collection) {
  return [`${origin}/tiles/${collection}/{z}/{x}/{y}.mvt`];
}

function authorized(token) {
  return { Authorization: `Bearer ${token}` };
}

async function api(token, path) {
  const res = await fetch(path, { headers: authorized(token) });
  if (res.status === 401 || res.status === 403) throw new AuthError(res.status);
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

class AuthError extends Error {
  constructor(status) {
    super(status === 403 ? 'this token may not read' : 'the token was refused');
  }
}

function logout(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (message) sessionStorage.setItem('trackd.login-message', message);
  window.location.reload();
}

function askForToken() {
  const form = $('login');
  form.hidden = false;
  $('login-error').textContent = sessionStorage.getItem('trackd.login-message') || '';
  sessionStorage.removeItem('trackd.login-message');
  $('token').focus();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const token = $('token').value.trim();
    if (!token) return;
    try {
      await api(token, '/v1/vehicles?limit=1');
    } catch (err) {
      $('login-error').textContent = err instanceof AuthError ? err.message : String(err.message);
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    form.hidden = true;
    start(token);
  });
}

// Where the data is: the vehicles collection's extent (estimated by PostgreSQL), else the world.
async function initialBounds(token) {
  try {
    const c = await api(token, '/collections/vehicles');
    const b = c.extent.spatial.bbox[0];
    if (b[2] - b[0] < 359) return [[b[0], b[1]], [b[2], b[3]]];
  } catch (err) {
    if (err instanceof AuthError) throw err;
  }
  return null;
}

function vehiclesInView(map) {
  const bounds = map.getBounds();
  const ids = new Set();
  for (const f of map.queryRenderedFeatures({ layers: ['vehicles'] })) {
    if (bounds.contains(f.geometry.coordinates)) ids.add(f.properties.vehicle_id);
  }
  return ids;
}

function fmt(n, unit) {
  return n === null || n === undefined ? '—' : `${Number(n).toFixed(1)} ${unit}`;
}

async function showVehicle(map, token, id) {
  const since = new Date(Date.now() - 3600 * 1000).toISOString();
  const enc = encodeURIComponent(id);
  const [v, track] = await Promise.all([
    api(token, `/v1/vehicles/${enc}`),
    api(token, `/v1/vehicles/${enc}/track?from=${encodeURIComponent(since)}`),
  ]);
  const [lon, lat] = v.geometry.coordinates;
  $('detail-id').textContent = id;
  $('detail-position').textContent = `${lat.toFixed(5)}, ${lon.toFixed(5)}`;
  $('detail-time').textContent = v.properties.last_updated;
  $('detail-speed').textContent = fmt(v.properties.speed_kmh, 'km/h');
  $('detail-heading').textContent = fmt(v.properties.heading_deg, '°');
  const p = track.properties;
  $('detail-track').textContent = `${p.points} positions, ${(p.distance_m / 1000).toFixed(2)} km`;
  $('details').hidden = false;
  $('details').dataset.vehicleId = id;
  map.getSource('track').setData(track.geometry
    ? track : { type: 'FeatureCollection', features: [] });
}

function addEvent(block) {
  let data = '';
  let id = null;
  for (const line of block.split('\n')) {
    if (line.startsWith('data:')) data += line.slice(5).trim();
    else if (line.startsWith('id:')) id = line.slice(3).trim();
  }
  if (!data) return id;
  const e = JSON.parse(data).properties;
  const li = document.createElement('li');
  li.className = e.kind;
  li.dataset.eventId = e.event_id;
  li.textContent = `${e.event_time.slice(11, 19)} ${e.vehicle_id} ${e.kind === 'enter'
    ? 'entered' : 'left'} ${e.zone_name}`;
  const ticker = $('ticker');
  ticker.prepend(li);
  while (ticker.children.length > TICKER_MAX) ticker.lastChild.remove();
  return id;
}

// The event ticker: the SSE stream read with fetch() so that it carries the Authorization
// header; on a break it reconnects after a second with Last-Event-ID, missing nothing.
async function streamEvents(token) {
  let last = null;
  for (;;) {
    try {
      const headers = { ...authorized(token), Accept: 'text/event-stream' };
      if (last !== null) headers['Last-Event-ID'] = last;
      const res = await fetch('/v1/events/stream', { headers, cache: 'no-store' });
      if (res.status === 401 || res.status === 403) return logout(new AuthError(res.status).message);
      if (res.ok) {
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value.replace(/\r\n?/g, '\n');
          for (let i = buffer.indexOf('\n\n'); i >= 0; i = buffer.indexOf('\n\n')) {
            const id = addEvent(buffer.slice(0, i));
            if (id) last = id;
            buffer = buffer.slice(i + 2);
          }
        }
      }
    } catch (err) {
      console.warn('event stream:', err);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function start(token) {
  $('bar').hidden = false;
  $('events').hidden = false;
  $('logout').addEventListener('click', () => logout(''));
  let bounds = null;
  try {
    bounds = await initialBounds(token);
  } catch (err) {
    return logout(err.message);
  }
  const map = new MapLibreMap({
    container: 'mapview',
    hash: true,
    ...(bounds ? { bounds, fitBoundsOptions: { padding: 40 } } : { center: [0, 20], zoom: 1 }),
    style: {
      version: 8,
      sources: {
        vehicles: { type: 'vector', tiles: tiles('vehicles'), maxzoom: 14 },
        geofences: { type: 'vector', tiles: tiles('geofences'), maxzoom: 14 },
        track: { type: 'geojson', data: { type: 'FeatureCollection', features: [] } },
      },
      layers: [
        { id: 'background', type: 'background', paint: { 'background-color': '#dfe6ec' } },
        { id: 'geofences-fill', type: 'fill', source: 'geofences', 'source-layer': 'geofences',
          paint: { 'fill-color': '#3b82f6', 'fill-opacity': 0.15 } },
        { id: 'geofences-line', type: 'line', source: 'geofences', 'source-layer': 'geofences',
          paint: { 'line-color': '#2563eb', 'line-width': 1.5 } },
        { id: 'track', type: 'line', source: 'track',
          paint: { 'line-color': '#f97316', 'line-width': 3 } },
        { id: 'vehicles', type: 'circle', source: 'vehicles', 'source-layer': 'vehicles',
          paint: { 'circle-radius': 5, 'circle-color': '#0f766e',
                   'circle-stroke-color': '#ffffff', 'circle-stroke-width': 1 } },
      ],
    },
    // Only this trackd gets the token.
    transformRequest: (url) => (url.startsWith(`${origin}/`)
      ? { url, headers: authorized(token) } : { url }),
  });
  window.map = map;  // for the browser test and the console

  map.on('error', (e) => {
    if (e.error && (e.error.status === 401 || e.error.status === 403)) {
      logout(new AuthError(e.error.status).message);
    }
  });
  map.on('idle', () => {
    $('count').textContent = `${vehiclesInView(map).size} vehicles in view`;
  });
  map.on('mouseenter', 'vehicles', () => { map.getCanvas().style.cursor = 'pointer'; });
  map.on('mouseleave', 'vehicles', () => { map.getCanvas().style.cursor = ''; });
  map.on('click', 'vehicles', (e) => {
    showVehicle(map, token, e.features[0].properties.vehicle_id).catch((err) => {
      if (err instanceof AuthError) logout(err.message);
    });
  });
  $('close-details').addEventListener('click', () => {
    $('details').hidden = true;
    delete $('details').dataset.vehicleId;
    map.getSource('track').setData({ type: 'FeatureCollection', features: [] });
  });
  map.on('load', () => {
    // Vehicles move: their tiles are asked for again (a 304 when nothing changed).
    setInterval(() => {
      map.getSource('vehicles').setTiles(tiles('vehicles'));
      const open = $('details').dataset.vehicleId;
      if (open) showVehicle(map, token, open).catch(() => {});
    }, REFRESH_MS);
    setInterval(() => map.getSource('geofences').setTiles(tiles('geofences')),
      GEOFENCE_REFRESH_MS);
  });
  streamEvents(token);
}

const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) start(saved); else askForToken();
