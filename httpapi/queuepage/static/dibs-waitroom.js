/*
 * dibs-waitroom.js: follow a user's place in a dibs waiting room, from any
 * page. No dependencies; served by dibs at /w/dibs-waitroom.js. The API
 * (window.DibsWaitroom) is described in docs/waitroom.md:
 *
 *   var room = DibsWaitroom.follow({
 *     server: 'https://dibs.example.com',  // '' (the default): this page's origin
 *     promotion: 'spring-drop',
 *     token: userToken,                     // the user's token (JWT), or a function giving one
 *     claim: false,                         // true: claim at once when admitted
 *     onStanding: function (s) {},          // waiting or prequeue: place, wait, paused, message
 *     onAdmitted: function (a) {},          // admitted: a.entry_token, a.expires_at
 *     onClaimed: function (r) {},           // with claim: true: r.ok, r.rank or r.code
 *     onEnd: function (s) {},               // used, expired, abandoned, sold_out, ended
 *     onChallenge: function (p) {},         // proof of work in progress: p.tried, p.difficulty
 *     onTransport: function (t) {},         // 'stream' or 'poll'
 *     onError: function (e) {}             // e.code, e.status, e.detail, e.fatal
 *   });
 *   room.stop();
 */
(function (global) {
  'use strict';

  // Statuses after which nothing more comes.
  var FINAL = { used: true, expired: true, abandoned: true, sold_out: true, ended: true };
  // Problems that no retry mends.
  var FATAL = { unauthorized: true, not_found: true, invalid_request: true, forbidden: true, method_not_allowed: true };

  // sleep waits ms, or less if signal aborts.
  function sleep(ms, signal) {
    return new Promise(function (resolve) {
      var t = setTimeout(resolve, ms);
      if (signal) {
        signal.addEventListener('abort', function () { clearTimeout(t); resolve(); }, { once: true });
      }
    });
  }

  // yieldNow gives the browser a turn (rendering, input) without the
  // throttling timers get in a background tab.
  function yieldNow() {
    return new Promise(function (resolve) {
      var ch = new MessageChannel();
      ch.port1.onmessage = function () { ch.port1.close(); resolve(); };
      ch.port2.postMessage(0);
    });
  }

  // SHA-256 (FIPS 180-4), written for the proof of work: the hash state
  // of the challenge's whole 64-byte blocks is kept, the nonce counts in
  // decimal in place in the last block(s), and a try hashes only the
  // blocks its digits changed (one, for a challenge as dibs makes them),
  // without allocating. Web Crypto's digest costs an awaited promise a
  // hash, many times the hash itself.

  // K: the round constants (FIPS 180-4, 4.2.2); IV: the initial hash
  // value (5.3.3).
  var K = new Int32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
  ]);
  var IV = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

  // compress hashes one block, its 16 message words in w[0..15] (w holds
  // 64: the schedule fills the rest), from the state st[so..so+7] into
  // out[oo..oo+7] (which may be the same place).
  function compress(w, st, so, out, oo) {
    var i, x, y;
    var a = st[so], b = st[so + 1], c = st[so + 2], d = st[so + 3];
    var e = st[so + 4], f = st[so + 5], g = st[so + 6], h = st[so + 7];
    for (i = 0; i < 64; i++) {
      if (i >= 16) {
        x = w[i - 15];
        y = w[i - 2];
        w[i] = (((x >>> 7 | x << 25) ^ (x >>> 18 | x << 14) ^ (x >>> 3)) + w[i - 7] +
          ((y >>> 17 | y << 15) ^ (y >>> 19 | y << 13) ^ (y >>> 10)) + w[i - 16]) | 0;
      }
      x = (h + ((e >>> 6 | e << 26) ^ (e >>> 11 | e << 21) ^ (e >>> 25 | e << 7)) +
        ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
      y = (((a >>> 2 | a << 30) ^ (a >>> 13 | a << 19) ^ (a >>> 22 | a << 10)) +
        ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + x) | 0;
      d = c; c = b; b = a; a = (x + y) | 0;
    }
    out[oo] = (st[so] + a) | 0; out[oo + 1] = (st[so + 1] + b) | 0;
    out[oo + 2] = (st[so + 2] + c) | 0; out[oo + 3] = (st[so + 3] + d) | 0;
    out[oo + 4] = (st[so + 4] + e) | 0; out[oo + 5] = (st[so + 5] + f) | 0;
    out[oo + 6] = (st[so + 6] + g) | 0; out[oo + 7] = (st[so + 7] + h) | 0;
  }

  // pack reads the big-endian words of m's bytes [from, to) into the
  // words of w that hold them, w holding the block that starts at m[off].
  function pack(m, off, from, to, w) {
    if (to <= from) return;
    for (var j = (from - off) >>> 2, end = (to - off + 3) >>> 2; j < end; j++) {
      var p = off + 4 * j;
      w[j] = m[p] << 24 | m[p + 1] << 16 | m[p + 2] << 8 | m[p + 3];
    }
  }

  // padded is data (bytes) with SHA-256's padding: 0x80, zeros, and the
  // bit length of data plus extra bytes hashed before it, in whole blocks.
  function padded(data, extra) {
    var m = new Uint8Array((data.length + 9 + 63) & ~63);
    m.set(data);
    m[data.length] = 0x80;
    var bits = (data.length + extra) * 8;
    var hi = Math.floor(bits / 4294967296), lo = bits >>> 0;
    for (var i = 0; i < 4; i++) {
      m[m.length - 8 + i] = hi >>> (24 - 8 * i);
      m[m.length - 4 + i] = lo >>> (24 - 8 * i);
    }
    return m;
  }

  // utf8 is the UTF-8 bytes of a string (a Uint8Array stays as it is).
  function utf8(s) {
    return typeof s === 'string' ? new TextEncoder().encode(s) : s;
  }

  // sha256 is the SHA-256 of data (a string, hashed as UTF-8, or bytes):
  // 32 bytes. The solver's own hash, synchronous; no Web Crypto.
  function sha256(data) {
    var m = padded(utf8(data), 0);
    var st = new Int32Array(IV), w = new Int32Array(64);
    for (var off = 0; off < m.length; off += 64) {
      pack(m, off, off, off + 64, w);
      compress(w, st, 0, st, 0);
    }
    var out = new Uint8Array(32);
    for (var i = 0; i < 32; i++) out[i] = st[i >> 2] >>> (24 - 8 * (i & 3));
    return out;
  }

  // zeroBits counts the leading zero bits of the 8 words of a digest.
  function zeroBits(st, so) {
    for (var n = 0, i = 0; i < 8; i++, n += 32) {
      if (st[so + i] !== 0) return n + Math.clz32(st[so + i]);
    }
    return n;
  }

  // Search tries prefix + n in decimal for n = 0, 1, 2, …: the state of
  // the prefix's whole blocks is computed once; the rest of the prefix,
  // the digits and the padding (the tail: one block, or two) are laid out
  // again only when the number of digits grows.
  function Search(prefix) {
    var pre = utf8(prefix);
    var whole = pre.length & ~63;
    var w = new Int32Array(64);
    this.mid = new Int32Array(IV);
    for (var off = 0; off < whole; off += 64) {
      pack(pre, off, off, off + 64, w);
      compress(w, this.mid, 0, this.mid, 0);
    }
    this.rest = pre.subarray(whole); // the prefix's bytes in the tail
    this.whole = whole;
    this.n = 0; // the next nonce to try
    this.layout();
  }

  // layout writes the tail for this.n: the rest, its digits, the padding;
  // the state before the tail's last block.
  Search.prototype.layout = function () {
    var digits = String(this.n), r = this.rest.length;
    var data = new Uint8Array(r + digits.length);
    data.set(this.rest);
    for (var i = 0; i < digits.length; i++) data[r + i] = digits.charCodeAt(i);
    this.m = padded(data, this.whole);
    this.end = data.length; // one past the last digit
    this.w = [new Int32Array(64), new Int32Array(64)];
    this.st = new Int32Array(24); // before block 0, before block 1, the digest
    this.st.set(this.mid);
    this.last = (this.m.length >>> 6) - 1; // 0 or 1
    pack(this.m, 0, 0, 64, this.w[0]);
    if (this.last) {
      pack(this.m, 64, 64, 128, this.w[1]);
      compress(this.w[0], this.st, 0, this.st, 8);
    }
  };

  // run tries up to count nonces from this.n on. Returns the first that
  // gives difficulty leading zero bits (a string), or null.
  Search.prototype.run = function (count, difficulty) {
    var m = this.m, st = this.st, last = this.last, wl = this.w[last], w0 = this.w[0];
    var so = 8 * last, loff = 64 * last, end = this.end, r = this.rest.length;
    for (var k = 0; k < count; k++) {
      compress(wl, st, so, st, 16);
      var h0 = st[16];
      if (Math.clz32(h0) >= difficulty || (h0 === 0 && zeroBits(st, 16) >= difficulty)) {
        return String(this.n++);
      }
      this.n++;
      // Count one up in the digits; a carry past the first grows them.
      var i = end - 1;
      while (i >= r && m[i] === 0x39) m[i--] = 0x30;
      if (i < r) {
        this.layout();
        return this.run(count - k - 1, difficulty);
      }
      m[i]++;
      if (i < loff) {
        pack(m, 0, i, Math.min(end, 64), w0);
        compress(w0, st, 0, st, 8);
      }
      pack(m, loff, Math.max(i, loff), end, wl);
    }
    return null;
  };

  // solve finds a decimal nonce such that SHA-256(challenge + ':' + nonce),
  // of the UTF-8 bytes, starts with at least difficulty zero bits: the
  // first from 0 up, as dibs's reference solver finds it. It hashes in
  // slices of about 10 ms and gives the browser a turn between them, so
  // the page stays responsive; onProgress({tried, difficulty, done}) comes
  // about every 100 ms and at the end. Resolves with the nonce (a
  // string), or null if signal aborted.
  async function solve(challenge, difficulty, onProgress, signal) {
    var s = new Search(challenge + ':');
    var told = Date.now();
    for (var slice = 1024; ;) {
      if (signal && signal.aborted) return null;
      var t0 = Date.now();
      var nonce = s.run(slice, difficulty);
      if (nonce !== null) {
        if (onProgress) onProgress({ tried: s.n, difficulty: difficulty, done: true });
        return nonce;
      }
      var took = Date.now() - t0;
      if (took < 5 && slice < 1 << 20) slice *= 2;
      else if (took > 20 && slice > 256) slice /= 2;
      if (Date.now() - told >= 100) {
        told = Date.now();
        if (onProgress) onProgress({ tried: s.n, difficulty: difficulty, done: false });
      }
      await yieldNow();
    }
  }

  // userOf reads the user id (the claim sub) of a JWT user token. It does
  // not check the token: dibs does, on every call.
  function userOf(token) {
    var parts = String(token || '').split('.');
    if (parts.length !== 3) return '';
    try {
      var b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
      while (b64.length % 4) b64 += '=';
      var sub = JSON.parse(atob(b64)).sub;
      return typeof sub === 'string' ? sub : '';
    } catch (e) {
      return '';
    }
  }

  // returnURL is base with the entry token of an admitted standing in its
  // fragment (never in its query: a fragment is not sent to any server, nor
  // in a Referer).
  function returnURL(base, admitted, promotion) {
    var u = String(base).split('#')[0];
    var f = 'entry_token=' + encodeURIComponent(admitted.entry_token);
    if (admitted.expires_at) f += '&expires_at=' + encodeURIComponent(admitted.expires_at);
    if (promotion) f += '&promotion=' + encodeURIComponent(promotion);
    return u + '#' + f;
  }

  // randomKey is an Idempotency-Key for one claim and its retries.
  function randomKey() {
    if (global.crypto && crypto.randomUUID) return crypto.randomUUID();
    var b = crypto.getRandomValues(new Uint8Array(16));
    return Array.prototype.map.call(b, function (x) { return (x + 256).toString(16).slice(1); }).join('');
  }

  // retryDelay is how long to wait before retrying an answer: its
  // Retry-After, else the backoff of the attempt, with some jitter.
  function retryDelay(res, attempt) {
    var after = res && res.retryAfter ? res.retryAfter * 1000 : Math.min(1000 * Math.pow(2, attempt), 30000);
    return Math.min(after, 30000) * (0.8 + Math.random() * 0.4);
  }

  // Client talks to one promotion's waiting room for one user.
  function Client(opts) {
    if (!opts || !opts.promotion) throw new Error('DibsWaitroom: promotion is required');
    if (!opts.token) throw new Error('DibsWaitroom: token is required');
    this.server = String(opts.server || '').replace(/\/+$/, '');
    this.promotion = opts.promotion;
    this.token = opts.token;
  }

  // bearer is the user token, from a string or a function.
  Client.prototype.bearer = async function () {
    return typeof this.token === 'function' ? await this.token() : this.token;
  };

  Client.prototype.path = function (rest) {
    return this.server + '/v1/promotions/' + encodeURIComponent(this.promotion) + rest;
  };

  // call sends one JSON request: {status, data, code, retryAfter}; a
  // network failure is status 0.
  Client.prototype.call = async function (method, rest, body, headers, signal) {
    var tok = await this.bearer();
    var h = { Accept: 'application/json', Authorization: 'Bearer ' + tok };
    if (body !== undefined) h['Content-Type'] = 'application/json';
    for (var k in headers || {}) h[k] = headers[k];
    var res;
    try {
      res = await fetch(this.path(rest), {
        method: method, headers: h, body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store', credentials: 'omit', signal: signal
      });
    } catch (e) {
      return { status: 0, data: null, code: 'network', retryAfter: 0, detail: String(e && e.message || e) };
    }
    var data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    return {
      status: res.status, data: data, code: data && data.code || '',
      detail: data && data.detail || '', retryAfter: Number(res.headers.get('Retry-After')) || 0
    };
  };

  // user is the id of the token's user.
  Client.prototype.user = async function () {
    return userOf(await this.bearer());
  };

  // standingOf turns an answer of join or status into a standing, or null
  // when it is a problem (res.code says which).
  function standingOf(res) {
    if (res.status === 200 || res.status === 202) return res.data;
    if (res.code === 'sold_out') return { status: 'sold_out' };
    if (res.code === 'ended') return { status: 'ended' };
    return null;
  }

  // follow joins the queue and follows the standing until a final status
  // or admission (see the top of this file). Returns {stop(), done}; done
  // resolves when following ends.
  function follow(opts) {
    var c = new Client(opts);
    var ctl = new AbortController();
    var signal = ctl.signal;
    var on = function (name, v) {
      if (signal.aborted && name !== 'onError') return;
      if (typeof opts[name] === 'function') {
        try { opts[name](v); } catch (e) { if (global.console) console.error(e); }
      }
    };
    var fail = function (res, fatal) {
      on('onError', { code: res.code || (res.status ? 'http_' + res.status : 'network'), status: res.status,
        detail: res.detail || '', fatal: !!fatal });
    };
    var transport = '';
    var setTransport = function (t) {
      if (t !== transport) { transport = t; on('onTransport', t); }
    };

    // join posts the join, solving a challenge if asked, retrying what a
    // retry can mend. Resolves with a standing, or null when it gave up.
    async function join() {
      var user = await c.user();
      var body = { user_id: user };
      for (var attempt = 0, solved = 0; !signal.aborted; attempt++) {
        var res = await c.call('POST', '/queue', body, null, signal);
        var st = standingOf(res);
        if (st) return st;
        if (res.code === 'challenge_required' && res.data && typeof res.data.challenge === 'string' && solved < 3) {
          solved++;
          var nonce = await solve(res.data.challenge, Number(res.data.difficulty) || 0, function (p) { on('onChallenge', p); }, signal);
          if (nonce === null) return null;
          body = { user_id: user, challenge: res.data.challenge, nonce: nonce };
          attempt = -1;
          continue;
        }
        if (FATAL[res.code] || res.code === 'challenge_required' || (res.status >= 400 && res.status < 500 &&
            res.status !== 429 && res.code !== 'not_started' && res.code !== 'request_in_progress')) {
          fail(res, true);
          return null;
        }
        fail(res, false);
        await sleep(retryDelay(res, attempt), signal);
      }
      return null;
    }

    // poll reads the standing once as JSON; null when it failed (told) or
    // the user must join again (st.rejoin).
    async function poll() {
      for (var attempt = 0; !signal.aborted; attempt++) {
        var res = await c.call('GET', '/queue/' + encodeURIComponent(await c.user()), undefined, null, signal);
        var st = standingOf(res);
        if (st) return st;
        if (res.code === 'not_found') return { rejoin: true };
        if (FATAL[res.code]) { fail(res, true); return null; }
        fail(res, false);
        await sleep(retryDelay(res, attempt), signal);
      }
      return null;
    }

    // stream reads the standing as server-sent events, calling each(st)
    // for every one. Resolves with the last standing read (null if none)
    // when the stream ends, fails or stalls.
    async function stream(each) {
      var sctl = new AbortController();
      var stop = function () { sctl.abort(); };
      signal.addEventListener('abort', stop, { once: true });
      var last = null;
      var watchdog = null;
      var arm = function () {
        clearTimeout(watchdog);
        watchdog = setTimeout(stop, 45000); // a heartbeat comes every 15 s
      };
      try {
        var res = await fetch(c.path('/queue/' + encodeURIComponent(await c.user())), {
          headers: { Accept: 'text/event-stream', Authorization: 'Bearer ' + await c.bearer() },
          cache: 'no-store', credentials: 'omit', signal: sctl.signal
        });
        var type = res.headers.get('Content-Type') || '';
        if (res.status !== 200 || type.indexOf('text/event-stream') !== 0 || !res.body) {
          var data = null;
          try { data = await res.json(); } catch (e) { data = null; }
          var code = data && data.code || '';
          if (code === 'sold_out' || code === 'ended') return { status: code };
          if (code === 'not_found') return { rejoin: true };
          if (FATAL[code]) {
            fail({ status: res.status, code: code, detail: data.detail }, true);
            return { fatal: true };
          }
          return null;
        }
        setTransport('stream');
        var reader = res.body.getReader();
        var dec = new TextDecoder();
        var buf = '', ev = '', data2 = '';
        arm();
        for (;;) {
          var r = await reader.read();
          if (r.done) break;
          arm();
          buf += dec.decode(r.value, { stream: true });
          var i;
          while ((i = buf.indexOf('\n')) >= 0) {
            var line = buf.slice(0, i).replace(/\r$/, '');
            buf = buf.slice(i + 1);
            if (line === '') {
              if (data2 && (ev || 'message') === 'status') {
                last = JSON.parse(data2);
                each(last);
                if (last.status !== 'waiting' && last.status !== 'prequeue') { sctl.abort(); return last; }
              }
              ev = ''; data2 = '';
              continue;
            }
            if (line.charAt(0) === ':') continue;
            var colon = line.indexOf(':');
            var field = colon < 0 ? line : line.slice(0, colon);
            var value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') ev = value;
            else if (field === 'data') data2 += (data2 ? '\n' : '') + value;
          }
        }
      } catch (e) {
        // a cut, a stall or stop(): the caller polls
      } finally {
        clearTimeout(watchdog);
        signal.removeEventListener('abort', stop);
      }
      return last;
    }

    // claim claims with the entry token of admitted, retrying what a
    // retry can mend with the same Idempotency-Key while the pass lives.
    async function claim(admitted) {
      var key = randomKey();
      var until = Date.parse(admitted.expires_at) || (Date.now() + 60000);
      var user = await c.user();
      for (var attempt = 0; !signal.aborted; attempt++) {
        var res = await c.call('POST', '/claims', { user_id: user },
          { 'X-Entry-Token': admitted.entry_token, 'Idempotency-Key': key }, signal);
        if (res.status === 202 && res.data) {
          return { ok: true, claim_id: res.data.claim_id, rank: res.data.rank, status: res.data.status };
        }
        var again = res.status === 0 || res.status === 429 || res.status === 503 || res.code === 'paused' ||
          res.code === 'request_in_progress';
        if (!again || Date.now() + retryDelay(res, attempt) > until) {
          return { ok: false, code: res.code || 'network', status: res.status, detail: res.detail };
        }
        fail(res, false);
        await sleep(retryDelay(res, attempt), signal);
      }
      return { ok: false, code: 'stopped', status: 0 };
    }

    // settle reports a standing; true when following is over.
    async function settle(st) {
      if (st.status === 'admitted') {
        on('onAdmitted', st);
        if (opts.claim) {
          var r = await claim(st);
          if (!signal.aborted) on('onClaimed', r);
        }
        return true;
      }
      if (FINAL[st.status]) {
        on('onEnd', st);
        return true;
      }
      on('onStanding', st);
      return false;
    }

    // waiting says whether st is a standing that is not over yet.
    function waiting(st) {
      return st.status === 'waiting' || st.status === 'prequeue';
    }

    // run joins, then follows the stream; when the stream fails or ends
    // before the standing is final, it polls (after poll_after_ms) and
    // tries the stream again after 2 s, doubling up to a minute while it
    // keeps failing.
    async function run() {
      var st = await join();
      var failures = 0;
      var streamAt = 0;
      while (st && !signal.aborted) {
        if (st.rejoin) {
          st = await join();
          continue;
        }
        if (await settle(st)) return;
        if (Date.now() >= streamAt) {
          var opened = Date.now();
          var last = await stream(function (s) { if (waiting(s)) on('onStanding', s); });
          if (signal.aborted || (last && last.fatal)) return;
          if (last && (last.rejoin || !waiting(last))) {
            st = last;
            continue;
          }
          failures = Date.now() - opened > 60000 ? 1 : failures + 1;
          streamAt = Date.now() + Math.min(2000 * Math.pow(2, failures - 1), 60000);
          setTransport('poll');
          st = await poll(); // at once: the cut may have hidden a change
          continue;
        }
        await sleep(Math.min(Math.max(Number(st.poll_after_ms) || 1000, 1000), 30000), signal);
        if (signal.aborted) return;
        st = await poll();
      }
    }

    var done = run().catch(function (e) {
      on('onError', { code: 'internal', status: 0, detail: String(e && e.message || e), fatal: true });
    });
    return {
      stop: function () { ctl.abort(); },
      done: done
    };
  }

  // claim claims once with an entry token (for a shop's page that got the
  // token in its URL fragment): resolves with {ok, rank, claim_id} or {ok:
  // false, code}. opts: server, promotion, token (the user token),
  // entryToken, idempotencyKey (optional).
  async function claimOnce(opts) {
    var c = new Client(opts);
    var res = await c.call('POST', '/claims', { user_id: await c.user() },
      { 'X-Entry-Token': opts.entryToken, 'Idempotency-Key': opts.idempotencyKey || randomKey() });
    if (res.status === 202 && res.data) return { ok: true, claim_id: res.data.claim_id, rank: res.data.rank, status: res.data.status };
    return { ok: false, code: res.code || 'network', status: res.status, detail: res.detail };
  }

  // entryTokenFrom reads what returnURL put in a URL's fragment:
  // {entry_token, expires_at, promotion}, or null.
  function entryTokenFrom(href) {
    var h = String(href || global.location && global.location.href || '').split('#')[1] || '';
    var out = {};
    h.split('&').forEach(function (kv) {
      var p = kv.split('=');
      if (p.length === 2) out[decodeURIComponent(p[0])] = decodeURIComponent(p[1]);
    });
    return out.entry_token ? out : null;
  }

  global.DibsWaitroom = {
    version: 1,
    follow: follow,
    claim: claimOnce,
    solve: solve,
    sha256: sha256,
    userOf: userOf,
    returnURL: returnURL,
    entryTokenFrom: entryTokenFrom
  };
})(typeof window !== 'undefined' ? window : this);
