// Strom's web console: one page, a view per location hash, every datum from
// the node's Connect API (HTTP+JSON) or its /metrics. It only reads.
//
// Admin calls go to this node, which answers them for the whole cluster.
// Data-path reads go to the bucket's leader through /ui/node/<id>/ (the
// browser may only call this origin; the node forwards those four reads).
// Values from the server are put in the page with textContent, never as
// HTML.
'use strict';

// ---- the API --------------------------------------------------------------

class APIError extends Error {
  constructor(status, body) {
    super(body.message || ('HTTP ' + status));
    this.code = body.code || '';
    this.detail = errorDetail(body);
  }
}

// call POSTs msg as JSON to a Connect method ("strom.v1.AdminService/ListDatabases")
// of this node, or of node `node` through the forwarder.
async function call(method, msg, node) {
  const url = node === undefined ? '/' + method : '/ui/node/' + node + '/' + method;
  const resp = await fetch(url, {
    method: 'POST',
    headers: {'Content-Type': 'application/json'},
    body: JSON.stringify(msg || {}),
  });
  const text = await resp.text();
  let body;
  try { body = JSON.parse(text); } catch (e) { body = {message: text.trim()}; }
  if (!resp.ok) throw new APIError(resp.status, body);
  return body;
}
const admin = (m, msg) => call('strom.v1.AdminService/' + m, msg);
const tablet = (m, msg, node) => call('strom.v1.TabletService/' + m, msg, node);

// errorDetail returns the strom.v1.ErrorDetail of a Connect error body
// ({name, leaderId}), decoded from its protobuf bytes: field 2 (name) and
// field 6 (leader_id) are what the console uses.
function errorDetail(body) {
  const d = (body.details || []).find(d => d.type === 'strom.v1.ErrorDetail');
  if (!d) return null;
  if (d.debug) return d.debug;
  const pad = '='.repeat((4 - d.value.length % 4) % 4);
  const bin = atob(d.value.replace(/-/g, '+').replace(/_/g, '/') + pad);
  const out = {};
  let i = 0;
  const varint = () => {
    let v = 0, shift = 0, b;
    do { b = bin.charCodeAt(i++); v += (b & 0x7f) * 2 ** shift; shift += 7; } while (b & 0x80);
    return v;
  };
  while (i < bin.length) {
    const key = varint(), field = key >> 3, wire = key & 7;
    if (wire === 0) {
      const v = varint();
      if (field === 6) out.leaderId = v;
    } else if (wire === 2) {
      const n = varint();
      if (field === 2) out.name = bin.slice(i, i + n);
      i += n;
    } else {
      break; // no other wire types in ErrorDetail
    }
  }
  return out;
}

// num reads a protojson number: int64s come as strings, zeros are omitted.
const num = v => v === undefined ? 0 : Number(v);

// ---- the page -------------------------------------------------------------

// h builds an element: h('td', {class: 'num'}, 'text', childElement).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function tableOf(id, headers, rows) {
  return h('table', {id},
    h('thead', {}, h('tr', {}, headers.map(x => h('th', {}, x)))),
    h('tbody', {}, rows));
}

function errorBox(err) {
  return h('div', {class: 'error'}, String(err.message || err));
}

const view = () => document.getElementById('view');
const ints = v => '[' + (v || []).join(',') + ']';
const dash = s => (s === undefined || s === '' ? '-' : s);
const kindOf = t => ((t.descriptor && t.descriptor.schema && t.descriptor.schema.primaryKey) || []).length > 0 ? 'primary-key table' : 'log table';
const mapText = m => Object.entries(m || {}).sort().map(([k, v]) => k + '=' + v).join(', ');

// Each view gets a generation; a view's loops stop once it is not current.
let generation = 0;

async function route() {
  const gen = ++generation;
  const alive = () => gen === generation;
  const [name, ...args] = (location.hash.replace(/^#\/?/, '') || 'cluster').split('/').map(decodeURIComponent);
  for (const a of document.querySelectorAll('header nav a')) {
    a.classList.toggle('active', a.getAttribute('href') === '#/' + name);
  }
  const views = {cluster: clusterView, tables: tablesView, table: tableView, tail: tailView, lookup: lookupView, throughput: throughputView};
  const v = views[name];
  view().replaceChildren();
  if (!v) { view().append(errorBox('no such page: ' + name)); return; }
  try {
    await v(alive, ...args);
  } catch (err) {
    if (alive()) view().append(errorBox(err));
  }
}

// every runs f now and then every ms while the view is current.
async function every(alive, ms, f) {
  while (alive()) {
    await f();
    await sleep(ms);
  }
}
const sleep = ms => new Promise(r => setTimeout(r, ms));

// ---- Cluster ----------------------------------------------------------------

async function clusterView(alive) {
  const root = h('div', {});
  view().append(h('h1', {}, 'Cluster'), root);
  await every(alive, 3000, async () => {
    let c;
    try { c = await admin('DescribeCluster', {}); } catch (err) { root.replaceChildren(errorBox(err)); return; }
    if (!alive()) return;
    document.getElementById('cluster-id').textContent = 'cluster ' + (c.clusterId || '');
    const nodes = (c.nodes || []).slice().sort((a, b) => num(a.id) - num(b.id));
    root.replaceChildren(
      h('dl', {id: 'cluster-summary'},
        h('dt', {}, 'Cluster id'), h('dd', {}, dash(c.clusterId)),
        h('dt', {}, 'Raft leader'), h('dd', {id: 'raft-leader'}, c.raftLeader ? 'node ' + c.raftLeader : 'none'),
        h('dt', {}, 'Voters'), h('dd', {}, ints(c.voters)),
        h('dt', {}, 'Coordinator epoch'), h('dd', {}, num(c.coordinatorEpoch)),
        h('dt', {}, 'Nodes'), h('dd', {id: 'node-count'}, nodes.length),
        h('dt', {}, 'Buckets'), h('dd', {}, num(c.buckets)),
        h('dt', {}, 'Under-replicated'), h('dd', {class: num(c.underReplicatedBuckets) ? 'bad' : ''}, num(c.underReplicatedBuckets)),
        h('dt', {}, 'Offline'), h('dd', {class: num(c.offlineBuckets) ? 'bad' : ''}, num(c.offlineBuckets)),
        h('dt', {}, 'Answered by version'), h('dd', {}, dash(c.version)),
        h('dt', {}, 'Feature level'), h('dd', {id: 'feature-level'}, num(c.activeFeatureLevel))),
      tableOf('nodes', ['ID', 'API address', 'Roles', 'Alive', 'Version', 'Feature level', 'Rack', 'Raft address', 'Gossip address'],
        nodes.map(n => h('tr', {'data-node': num(n.id)},
          h('td', {class: 'num'}, num(n.id)),
          h('td', {}, dash(n.apiAddress)),
          h('td', {class: 'roles'}, (n.roles || []).join(', ')),
          h('td', {class: n.alive ? 'ok alive' : 'bad alive'}, n.alive ? 'alive' : 'dead'),
          h('td', {}, dash(n.version)),
          h('td', {class: 'num'}, num(n.featureLevel)),
          h('td', {}, dash(n.rack)),
          h('td', {}, dash(n.raftAddress)),
          h('td', {}, dash(n.gossipAddress))))));
  });
}

// ---- Databases and tables ---------------------------------------------------

async function tablesView(alive) {
  view().append(h('h1', {}, 'Databases and tables'));
  const dbs = (await admin('ListDatabases', {})).databases || [];
  if (dbs.length === 0) view().append(h('p', {class: 'muted'}, 'No databases.'));
  for (const db of dbs) {
    const names = (await admin('ListTables', {database: db})).tables || [];
    const rows = [];
    for (const name of names) {
      const t = (await admin('GetTable', {database: db, table: name})).table;
      const path = db + '.' + name;
      rows.push(h('tr', {'data-table': path},
        h('td', {}, h('a', {href: '#/table/' + encodeURIComponent(db) + '/' + encodeURIComponent(name)}, name)),
        h('td', {}, kindOf(t)),
        h('td', {class: 'num'}, num(t.descriptor.bucketCount)),
        h('td', {}, dash(t.descriptor.comment))));
    }
    if (!alive()) return;
    view().append(h('h2', {}, 'Database ' + db),
      names.length ? tableOf('tables-' + db, ['Table', 'Kind', 'Buckets', 'Comment'], rows) : h('p', {class: 'muted'}, 'No tables.'));
  }
}

// byLeader groups bucket numbers by the node leading them (-1: none).
function byLeader(leaders) {
  const groups = new Map();
  for (const [b, node] of leaders) {
    if (!groups.has(node)) groups.set(node, []);
    groups.get(node).push(b);
  }
  return groups;
}

const leadersOf = t => new Map((t.buckets || []).map(b => [num(b.bucket), b.leader === undefined ? 0 : b.leader]));

// askLeaders sends a per-bucket read (DescribeBuckets, ListOffsets) to each
// bucket's leader, as `strom table describe` does, and returns bucket ->
// its result. leaders (bucket -> node) follows NOT_LEADER_OR_FOLLOWER
// hints: a bucket whose leader moved is asked again where the hint says,
// twice at most. A bucket that cannot be asked gets {error}.
async function askLeaders(leaders, method, msg) {
  const out = new Map();
  let todo = [...leaders.keys()];
  for (let round = 0; round < 3 && todo.length > 0; round++) {
    const again = [];
    await Promise.all([...byLeader(new Map(todo.map(b => [b, leaders.get(b)])))].map(async ([node, buckets]) => {
      if (node < 0) { for (const b of buckets) out.set(b, {error: {message: 'no leader'}}); return; }
      try {
        const r = await tablet(method, {...msg, buckets}, node);
        for (const st of r.buckets || []) {
          const b = num(st.bucket), e = st.error;
          if (e && e.name === 'NOT_LEADER_OR_FOLLOWER' && e.leaderId >= 0 && e.leaderId !== node) {
            leaders.set(b, e.leaderId);
            again.push(b);
          }
          out.set(b, st);
        }
      } catch (err) {
        for (const b of buckets) out.set(b, {error: {message: err.message}});
      }
    }));
    todo = again;
  }
  return out;
}

async function tableView(alive, db, name) {
  const t = (await admin('GetTable', {database: db, table: name})).table;
  const d = t.descriptor || {};
  const schema = d.schema || {columns: []};
  const pk = new Set(schema.primaryKey || []);
  const base = encodeURIComponent(db) + '/' + encodeURIComponent(name);
  view().append(
    h('h1', {}, 'Table ' + db + '.' + name),
    h('p', {class: 'actions'},
      h('a', {href: '#/tail/' + base, id: 'tail-link'}, 'Live tail'),
      pk.size ? h('a', {href: '#/lookup/' + base, id: 'lookup-link'}, 'Primary-key lookup') : null),
    h('dl', {id: 'table-summary'},
      h('dt', {}, 'Kind'), h('dd', {}, kindOf(t)),
      h('dt', {}, 'Table id'), h('dd', {}, num(t.tableId)),
      h('dt', {}, 'Schema id'), h('dd', {}, num(t.schemaId)),
      h('dt', {}, 'Primary key'), h('dd', {}, dash((schema.primaryKey || []).join(', '))),
      h('dt', {}, 'Bucket key'), h('dd', {}, dash((d.bucketKeys || []).join(', '))),
      h('dt', {}, 'Partition key'), h('dd', {}, dash((d.partitionKeys || []).join(', '))),
      h('dt', {}, 'Buckets'), h('dd', {}, num(d.bucketCount)),
      h('dt', {}, 'Comment'), h('dd', {}, dash(d.comment)),
      h('dt', {}, 'Options'), h('dd', {id: 'table-options'}, dash(mapText(d.properties))),
      h('dt', {}, 'Custom options'), h('dd', {}, dash(mapText(d.customProperties))),
      h('dt', {}, 'Created'), h('dd', {}, new Date(num(t.createdTimeMs)).toISOString())),
    h('h2', {}, 'Schema'),
    tableOf('schema', ['Column', 'Type', 'Key', 'Comment'], (schema.columns || []).map(c =>
      h('tr', {'data-column': c.name}, h('td', {}, c.name), h('td', {}, c.type), h('td', {}, pk.has(c.name) ? 'PK' : '-'), h('td', {}, dash(c.comment))))),
    h('h2', {}, 'Buckets'));
  const box = h('div', {});
  view().append(box);
  await every(alive, 3000, async () => {
    let cur = t;
    try { cur = (await admin('GetTable', {database: db, table: name})).table; } catch (err) { /* keep the last */ }
    const states = await askLeaders(leadersOf(cur), 'DescribeBuckets', {database: db, table: name});
    if (!alive()) return;
    box.replaceChildren(tableOf('buckets',
      ['Bucket', 'Leader', 'Epoch', 'Replicas', 'ISR', 'High watermark', 'Log start', 'Log end', 'Replica log ends', 'Lag'],
      (cur.buckets || []).map(b => {
        const st = states.get(num(b.bucket)) || {error: {message: 'no answer'}};
        const known = !st.error;
        const rep = known ? (st.replicas || []) : [];
        const offset = v => (v === undefined ? 0 : (Number(v) < 0 ? '?' : v));
        return h('tr', {'data-bucket': num(b.bucket)},
          h('td', {class: 'num'}, num(b.bucket)),
          h('td', {class: 'num leader'}, b.leader === undefined ? 0 : b.leader),
          h('td', {class: 'num'}, num(b.leaderEpoch)),
          h('td', {}, ints(b.replicas)),
          h('td', {class: 'isr'}, ints(b.isr)),
          h('td', {class: 'num hw'}, known ? num(st.highWatermark) : 'unknown'),
          h('td', {class: 'num'}, known ? num(st.logStartOffset) : 'unknown'),
          h('td', {class: 'num'}, known ? num(st.logEndOffset) : 'unknown'),
          h('td', {}, known ? rep.map(r => num(r.node) + ':' + offset(r.logEndOffset)).join(' ') : 'unknown'),
          h('td', {class: 'lag'}, known ? rep.map(r => num(r.node) + ':' + offset(r.lag) + (r.inSync ? '' : '(out of ISR)')).join(' ') : dash(st.error.message)));
      })));
  });
}

// ---- Live tail ----------------------------------------------------------------

const tailKeep = 200; // rows kept on the page
const tailBack = 20;  // a tail starts this many offsets before each bucket's end

async function tailView(alive, db, name) {
  const t = (await admin('GetTable', {database: db, table: name})).table;
  const columns = ((t.descriptor.schema || {}).columns || []).map(c => c.name);
  const chosen = new Set(columns);
  const status = h('p', {id: 'tail-status', class: 'muted'}, 'starting');
  const box = h('div', {});
  const chooser = h('p', {class: 'chooser', id: 'columns'}, 'Columns: ', columns.map(c =>
    h('label', {}, h('input', {type: 'checkbox', checked: true, name: c, onchange: e => {
      if (e.target.checked) chosen.add(c); else chosen.delete(c);
      restart();
    }}), ' ' + c)));
  view().append(h('h1', {}, 'Live tail of ' + db + '.' + name), chooser, status, box);

  let tailGen = 0;
  const restart = () => {
    const g = ++tailGen;
    const live = () => alive() && g === tailGen;
    // Columns in table order: the fetch returns them so.
    const cols = columns.filter(c => chosen.has(c));
    runTail(live, db, name, t, cols.length === columns.length ? [] : cols, box, status)
      .catch(err => { if (live()) status.replaceChildren(errorBox(err)); });
  };
  restart();
}

// runTail long-polls each leader node for its buckets' new rows, from a
// little before their ends, and puts them at the top of a table.
async function runTail(live, db, name, t, cols, box, status) {
  const leaders = leadersOf(t);
  const pos = new Map();
  const msg = spec => ({database: db, table: name, spec: 'OFFSET_SPEC_' + spec});
  const earliest = await askLeaders(leaders, 'ListOffsets', msg('EARLIEST'));
  const latest = await askLeaders(leaders, 'ListOffsets', msg('LATEST'));
  for (const [b, r] of latest) {
    const first = earliest.get(b);
    // A bucket without both offsets is read from its first (-2, below).
    if (!r.error && first && !first.error) pos.set(b, Math.max(num(first.offset), num(r.offset) - tailBack));
  }
  let header = null;
  const body = h('tbody', {});
  let count = 0;
  const show = (rows, names) => {
    if (!header) {
      header = ['_bucket', '_offset', '_timestamp', '_change_type', ...names];
      box.replaceChildren(h('table', {id: 'tail'}, h('thead', {}, h('tr', {}, header.map(x => h('th', {}, x)))), body));
    }
    rows.sort((a, b) => num(a._offset) - num(b._offset));
    for (const r of rows) {
      body.prepend(h('tr', {'data-offset': num(r._offset), 'data-bucket': num(r._bucket)},
        header.map(c => h('td', {}, r[c] === null || r[c] === undefined ? 'null' : (typeof r[c] === 'object' ? JSON.stringify(r[c]) : r[c])))));
      count++;
    }
    while (body.childElementCount > tailKeep) body.lastElementChild.remove();
  };
  status.textContent = 'following ' + pos.size + ' buckets from ' + [...pos].map(([b, o]) => b + ':' + o).join(' ');

  const running = new Set(); // nodes with a loop
  const problems = new Map(); // bucket -> why it is not followed
  const loop = async node => {
    running.add(node);
    try {
      while (live()) {
        const buckets = [...leaders].filter(([b, n]) => n === node && !problems.has(b)).map(([b]) => b);
        if (buckets.length === 0) return;
        let r;
        try {
          r = await tablet('FetchLog', {
            database: db, table: name, columns: cols, maxWaitMs: 1000, jsonRows: true,
            // -2: the bucket's first offset, for one ListOffsets did not answer.
            buckets: buckets.map(b => ({bucket: b, offset: String(pos.has(b) ? pos.get(b) : -2)})),
          }, node);
        } catch (err) {
          if (!live()) return;
          status.textContent = 'node ' + node + ': ' + err.message + '; retrying';
          await sleep(1000);
          await refreshLeaders(db, name, leaders).catch(() => {});
          startLoops();
          continue;
        }
        if (!live()) return;
        if (!header) show([], r.columns || []);
        for (const res of r.buckets || []) {
          const b = num(res.bucket);
          if (res.error) {
            if (res.error.name === 'NOT_LEADER_OR_FOLLOWER' && res.error.leaderId >= 0) {
              leaders.set(b, res.error.leaderId);
              startLoops();
            } else if (res.error.name === 'NOT_LEADER_OR_FOLLOWER' || res.error.retriable) {
              // No leader known yet (an election), or a passing error: ask
              // the metadata again in a second.
              leaders.set(b, -1);
              sleep(1000).then(() => refreshLeaders(db, name, leaders)).then(startLoops).catch(() => {});
            } else {
              // The console does not skip what it cannot read (that loses
              // records): it stops following the bucket and says why.
              leaders.set(b, -1);
              problems.set(b, res.error.name + ': ' + res.error.message);
            }
            continue;
          }
          // A fetch answers with whole batches: rows before the offset
          // asked for may come first.
          const from = pos.has(b) ? pos.get(b) : -Infinity;
          const rows = (res.rows || []).filter(row => num(row._offset) >= from);
          if (rows.length) show(rows, r.columns || []);
          if (res.nextOffset !== undefined) pos.set(b, num(res.nextOffset));
        }
        status.textContent = count + ' rows so far; at ' + [...pos].map(([b, o]) => b + ':' + o).join(' ') +
          [...problems].map(([b, p]) => '; bucket ' + b + ' stopped: ' + p).join('');
      }
    } finally {
      running.delete(node);
    }
  };
  const startLoops = () => {
    for (const node of byLeader(leaders).keys()) {
      if (node >= 0 && !running.has(node)) loop(node);
    }
  };
  startLoops();
}

async function refreshLeaders(db, name, leaders) {
  const t = (await admin('GetTable', {database: db, table: name})).table;
  for (const [b, n] of leadersOf(t)) leaders.set(b, n);
}

// ---- Primary-key lookup ----------------------------------------------------------

async function lookupView(alive, db, name) {
  const t = (await admin('GetTable', {database: db, table: name})).table;
  const schema = t.descriptor.schema || {};
  const types = new Map((schema.columns || []).map(c => [c.name, c.type]));
  const pk = schema.primaryKey || [];
  const result = h('div', {id: 'lookup-result'});
  const form = h('form', {class: 'lookup', id: 'lookup-form', onsubmit: async e => {
    e.preventDefault();
    const key = {};
    for (const c of pk) key[c] = jsonValue(types.get(c), form.elements[c].value);
    result.replaceChildren(h('p', {class: 'muted'}, 'looking up'));
    try {
      const rows = await lookup(db, name, key);
      result.replaceChildren(rows.length === 0 ? h('p', {id: 'lookup-none'}, 'No row has this key.') :
        tableOf('lookup-row', ['Column', 'Value'], Object.entries(rows[0]).map(([k, v]) =>
          h('tr', {'data-column': k}, h('td', {}, k), h('td', {}, v === null ? 'null' : String(v))))));
    } catch (err) {
      result.replaceChildren(errorBox(err));
    }
  }},
  pk.map(c => h('label', {}, c + ' (' + types.get(c) + ')', h('input', {name: c, required: true}))),
  h('button', {type: 'submit'}, 'Look up'));
  view().append(h('h1', {}, 'Lookup in ' + db + '.' + name), form, result);
}

// lookup asks this node, then the bucket's leader it names.
async function lookup(db, name, key) {
  const msg = {database: db, table: name, keys: [key]};
  try {
    return (await tablet('Lookup', msg)).rows || [];
  } catch (err) {
    const d = err.detail;
    if (!d || d.name !== 'NOT_LEADER_OR_FOLLOWER' || d.leaderId === undefined) throw err;
    return (await tablet('Lookup', msg, d.leaderId)).rows || [];
  }
}

// jsonValue turns a form field into the JSON the API takes for a column of
// SQL type `type`: numbers for integers and floats that a double holds,
// true/false for BOOLEAN, text for the rest (DECIMAL and big BIGINTs too).
function jsonValue(type, text) {
  const t = (type || '').toUpperCase();
  if (/^(TINYINT|SMALLINT|INT|INTEGER|BIGINT|FLOAT|DOUBLE)\b/.test(t)) {
    const n = Number(text);
    return Number.isSafeInteger(n) || (!/INT/.test(t) && Number.isFinite(n)) ? n : text;
  }
  if (/^BOOLEAN\b/.test(t)) return text.trim().toLowerCase() === 'true';
  return text;
}

// ---- Throughput ----------------------------------------------------------------

// The node's own counters, summed over their labels.
const series = [
  {metric: 'strom_tabletserver_messages_in_total', label: 'rows in', chart: 'rows', color: '#2f6fdf'},
  {metric: 'strom_tabletserver_messages_out_total', label: 'rows out', chart: 'rows', color: '#e0752d'},
  {metric: 'strom_tabletserver_bytes_in_total', label: 'bytes in', chart: 'bytes', color: '#2f6fdf'},
  {metric: 'strom_tabletserver_bytes_out_total', label: 'bytes out', chart: 'bytes', color: '#e0752d'},
  {metric: 'strom_tabletserver_replication_bytes_in_total', label: 'replication in', chart: 'bytes', color: '#2a9d5b'},
  {metric: 'strom_tabletserver_replication_bytes_out_total', label: 'replication out', chart: 'bytes', color: '#9b4dca'},
];
const pollMs = 2000, keepPoints = 90;

// parseMetrics sums each metric of the Prometheus text format over its labels.
function parseMetrics(text) {
  const sums = {};
  for (const line of text.split('\n')) {
    if (line === '' || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (m) sums[m[1]] = (sums[m[1]] || 0) + Number(m[3]);
  }
  return sums;
}

async function throughputView(alive) {
  view().append(h('h1', {}, 'Throughput of this node'),
    h('p', {class: 'muted'}, 'Rates from this node\'s /metrics counters, polled every ' + pollMs / 1000 + ' s.'));
  const charts = {
    rows: h('canvas', {id: 'chart-rows', width: 900, height: 220}),
    bytes: h('canvas', {id: 'chart-bytes', width: 900, height: 220}),
  };
  const totals = h('div', {});
  view().append(h('h2', {}, 'Rows per second'), charts.rows, h('h2', {}, 'Bytes per second'), charts.bytes, h('h2', {}, 'Totals'), totals);
  const points = []; // {t, rates: {metric: per second}}
  let last = null;
  await every(alive, pollMs, async () => {
    let sums;
    try {
      const resp = await fetch('/metrics');
      sums = parseMetrics(await resp.text());
    } catch (err) { totals.replaceChildren(errorBox(err)); return; }
    if (!alive()) return;
    const now = Date.now();
    if (last) {
      const rates = {};
      for (const s of series) rates[s.metric] = Math.max(0, ((sums[s.metric] || 0) - (last.sums[s.metric] || 0)) * 1000 / (now - last.t));
      points.push({t: now, rates});
      if (points.length > keepPoints) points.shift();
    }
    last = {t: now, sums};
    for (const [name, canvas] of Object.entries(charts)) {
      drawChart(canvas, series.filter(s => s.chart === name), points);
      canvas.dataset.points = points.length;
    }
    totals.replaceChildren(tableOf('totals', ['Counter', 'Total', 'Now per second'], series.map(s =>
      h('tr', {'data-metric': s.metric}, h('td', {}, s.metric), h('td', {class: 'num total'}, sums[s.metric] || 0),
        points.length ? h('td', {class: 'num rate', 'data-rate': points[points.length - 1].rates[s.metric]}, human(points[points.length - 1].rates[s.metric])) :
          h('td', {class: 'num rate'}, '-')))));
  });
}

function human(v) {
  for (const [d, u] of [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) if (v >= d) return (v / d).toFixed(1) + u;
  return v.toFixed(v < 10 ? 1 : 0);
}

// drawChart draws lines of per-second rates against time, with a y axis
// from 0 to the largest value shown and a legend.
function drawChart(canvas, lines, points) {
  const g = canvas.getContext('2d');
  const W = canvas.width, H = canvas.height, L = 60, R = 10, T = 24, B = 24;
  g.clearRect(0, 0, W, H);
  g.font = '12px system-ui, sans-serif';
  let top = 0;
  for (const p of points) for (const s of lines) top = Math.max(top, p.rates[s.metric]);
  top = top > 0 ? top * 1.1 : 1;
  g.strokeStyle = '#dde1e8'; g.fillStyle = '#5b6475'; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = T + (H - T - B) * (1 - i / 4);
    g.beginPath(); g.moveTo(L, y); g.lineTo(W - R, y); g.stroke();
    g.fillText(human(top * i / 4), 4, y + 4);
  }
  g.fillText('last ' + (keepPoints * pollMs / 1000) + ' s', L, H - 6);
  // The newest point is at the right edge.
  const x = i => L + (W - L - R) * (keepPoints - points.length + i) / (keepPoints - 1);
  let lx = L;
  for (const s of lines) {
    g.strokeStyle = s.color; g.lineWidth = 2;
    g.beginPath();
    points.forEach((p, i) => {
      const y = T + (H - T - B) * (1 - p.rates[s.metric] / top);
      if (i === 0) g.moveTo(x(i), y); else g.lineTo(x(i), y);
    });
    g.stroke();
    g.fillStyle = s.color;
    if (points.length === 1) { // no line yet: a dot
      const y = T + (H - T - B) * (1 - points[0].rates[s.metric] / top);
      g.fillRect(x(0) - 2, y - 2, 4, 4);
    }
    g.fillRect(lx, 6, 10, 10);
    g.fillStyle = '#1d2330'; g.fillText(s.label, lx + 14, 15);
    lx += g.measureText(s.label).width + 34;
  }
}

window.addEventListener('hashchange', route);
route();
