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

  // leadingZeroBits counts the zero bits at the start of a digest.
  function leadingZeroBits(buf) {
    var b = new Uint8Array(buf);
    var n = 0;
    for (var i = 0; i < b.length; i++) {
      if (b[i] === 0) { n += 8; continue; }
      return n + Math.clz32(b[i]) - 24;
    }
    return n;
  }

  // solve finds a decimal nonce such that SHA-256(challenge + ':' + nonce),
  // of the UTF-8 bytes, starts with at least difficulty zero bits. It
  // hashes in batches and yields between them, so the page stays
  // responsive; onProgress({tried, difficulty}) comes about every 100 ms.
  // Resolves with the nonce (a string), or null if signal aborted.
  async function solve(challenge, difficulty, onProgress, signal) {
    var enc = new TextEncoder();
    var prefix = challenge + ':';
    var batch = 64;
    var told = Date.now();
    for (var n = 0; ; n += batch) {
      if (signal && signal.aborted) return null;
      var jobs = [];
      for (var i = 0; i < batch; i++) {
        jobs.push(crypto.subtle.digest('SHA-256', enc.encode(prefix + (n + i))));
      }
      var sums = await Promise.all(jobs);
      for (var j = 0; j < sums.length; j++) {
        if (leadingZeroBits(sums[j]) >= difficulty) {
          if (onProgress) onProgress({ tried: n + j + 1, difficulty: difficulty, done: true });
          return String(n + j);
        }
      }
      if (Date.now() - told >= 100) {
        told = Date.now();
        if (onProgress) onProgress({ tried: n + batch, difficulty: difficulty, done: false });
        await yieldNow();
      }
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
    userOf: userOf,
    returnURL: returnURL,
    entryTokenFrom: entryTokenFrom
  };
})(typeof window !== 'undefined' ? window : this);
