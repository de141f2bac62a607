/*
 * The queue page at /w/{id}: reads its setting from #room's data-config,
 * the user token from the URL fragment (#token=…, then kept in
 * sessionStorage), and follows the user's place with dibs-waitroom.js.
 * Every text from the server or the setting is put in as text, never as
 * HTML.
 */
(function () {
  'use strict';

  var room = document.getElementById('room');
  var cfg = JSON.parse(room.getAttribute('data-config'));
  var texts = cfg.texts;
  // The API is beside /w/: the page works behind a proxy's path prefix too.
  var server = new URL('..', document.baseURI).href.replace(/\/+$/, '');
  var $ = function (id) { return document.getElementById(id); };

  function show(id, on) { $(id).hidden = !on; }
  function text(id, s) { $(id).textContent = s == null ? '' : String(s); }
  function state(s) { room.setAttribute('data-state', s); }

  // style applies the setting's colours and logo.
  function style() {
    var root = document.documentElement.style;
    var c = cfg.colors || {};
    if (c.background) root.setProperty('--bg', c.background);
    if (c.text) root.setProperty('--fg', c.text);
    if (c.accent) root.setProperty('--accent', c.accent);
    if (cfg.logo_url && cfg.logo_url.indexOf('https://') === 0) {
      var img = $('logo');
      img.alt = cfg.title;
      img.src = cfg.logo_url;
      img.hidden = false;
    }
    text('heading', texts.heading);
    if (cfg.return_url) $('back').href = cfg.return_url;
  }

  // userToken reads #token=… from the fragment (and takes it out of the
  // address bar), else the one kept for this tab.
  function userToken() {
    var key = 'dibs-waitroom:token:' + cfg.promotion;
    var m = /(?:^|&)token=([^&]*)/.exec(location.hash.slice(1));
    var tok = '';
    if (m) {
      try { tok = decodeURIComponent(m[1]); } catch (e) { tok = ''; }
      try { sessionStorage.setItem(key, tok); } catch (e) { /* storage off: this load only */ }
      history.replaceState(null, '', location.pathname + location.search);
      return tok;
    }
    try { return sessionStorage.getItem(key) || ''; } catch (e) { return ''; }
  }

  // span writes a number of seconds for people.
  function span(s) {
    if (s < 60) return Math.max(1, Math.round(s)) + ' s';
    if (s < 3600) return Math.round(s / 60) + ' min';
    return (Math.round(s / 360) / 10) + ' h';
  }

  // range writes an estimated wait [low, high].
  function range(r, paused) {
    if (!r || r.length !== 2) return '–';
    var lo = span(r[0]), hi = span(r[1]);
    var s = r[1] < 1 ? 'a moment' : lo === hi ? 'about ' + hi : lo + ' to ' + hi;
    return paused ? s + ' once the sale goes on' : s;
  }

  function message(st) {
    var m = st && typeof st.message === 'string' ? st.message : '';
    text('message', m);
    show('message', m !== '');
  }

  // The stock left, from the promotion (read at most every 30 s).
  var remaining = null;
  var stockRead = 0;
  function readStock() {
    if (Date.now() - stockRead < 30000) return;
    stockRead = Date.now();
    fetch(server + '/v1/promotions/' + encodeURIComponent(cfg.promotion), { cache: 'no-store', credentials: 'omit' })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (p) {
        if (p && p.counts && typeof p.counts.remaining === 'number') {
          remaining = p.counts.remaining;
          text('remaining', remaining.toLocaleString());
          show('stock-row', true);
        }
      })
      .catch(function () { /* the place matters more than the stock */ });
  }

  function standing(st) {
    message(st);
    show('progress', false);
    show('rejoin', false);
    if (st.status === 'prequeue') {
      state('prequeue');
      show('standing', false);
      var at = st.shuffle_at ? new Date(st.shuffle_at) : null;
      text('note', texts.prequeue + (at ? '\nPlaces are given at ' + at.toLocaleTimeString() + '.' : ''));
      return;
    }
    state('waiting');
    show('heading', true);
    readStock();
    show('standing', true);
    text('position', Number(st.position).toLocaleString());
    text('wait', range(st.estimated_wait_range_seconds, st.paused));
    text('note', st.paused ? texts.paused : texts.waiting);
    var short = st.stock_expected_to_last === false || (remaining !== null && st.position > remaining);
    text('stock-short', texts.stock_short);
    show('stock-short', short);
  }

  // over shows a final state: its text, the way back, and a button to
  // join again where joining again gives a new place.
  function over(s, words, again) {
    state(s);
    show('heading', false);
    show('standing', false);
    show('stock-short', false);
    show('progress', false);
    text('note', '');
    text('result', words);
    show('result', true);
    show('rejoin', !!again);
    show('back', !!cfg.return_url);
  }

  function end(st) {
    message(st);
    var again = st.status === 'expired' || st.status === 'abandoned';
    over(st.status, texts[st.status === 'abandoned' ? 'expired' : st.status] || st.status, again);
  }

  function admitted(a) {
    message(a);
    show('standing', false);
    show('stock-short', false);
    if (cfg.mode === 'return') {
      var to = DibsWaitroom.returnURL(cfg.return_url, a, cfg.promotion);
      state('returning');
      text('note', texts.admitted);
      $('back').href = to;
      show('back', true);
      location.replace(to);
      return;
    }
    state('claiming');
    text('note', texts.admitted);
  }

  function claimed(r) {
    if (r.ok) {
      over('claimed', texts.claimed + (r.rank ? '\nYour claim: #' + r.rank : ''), false);
      return;
    }
    switch (r.code) {
      case 'sold_out': over('sold_out', texts.sold_out, false); break;
      case 'ended': over('ended', texts.ended, false); break;
      case 'already_claimed': over('used', texts.used, false); break;
      case 'not_admitted': over('expired', texts.expired, true); break;
      default: over('error', 'The claim did not go through (' + (r.code || r.status) + '). You may join the line again.', true);
    }
  }

  function error(e) {
    if (!e.fatal) {
      text('note', e.code === 'not_started'
        ? 'The sale has not started yet: this page joins the line as soon as it opens.'
        : 'Connection trouble: trying again…');
      return;
    }
    if (e.code === 'unauthorized') {
      over('error', 'Your link has expired or is not valid. Go back to the shop and open the waiting room again.', false);
    } else if (e.code === 'not_found') {
      over('error', 'This waiting room is closed.', false);
    } else {
      over('error', 'Something went wrong (' + e.code + '). Reload the page to try again.', false);
    }
  }

  var following = null;
  function start(token) {
    if (following) following.stop();
    show('result', false);
    show('rejoin', false);
    state('joining');
    text('note', 'Joining the line…');
    following = DibsWaitroom.follow({
      server: server,
      promotion: cfg.promotion,
      token: token,
      claim: cfg.mode !== 'return',
      onStanding: standing,
      onAdmitted: admitted,
      onClaimed: claimed,
      onEnd: end,
      onError: error,
      onTransport: function (t) { room.setAttribute('data-transport', t); },
      onChallenge: function (p) {
        state('challenge');
        show('progress', true);
        text('progress', p.done ? 'Checked.' : 'Checking your browser… (' + p.tried.toLocaleString() + ' tries)');
      }
    });
  }

  style();
  if (!cfg.user_tokens) {
    over('no_tokens', 'This waiting room is not open: its operator must configure user tokens (edge.user_tokens) for it to work.', false);
    return;
  }
  var token = userToken();
  if (!token || !DibsWaitroom.userOf(token)) {
    over('no_token', 'Open this page from the link the shop gave you.', false);
    return;
  }
  $('rejoin').addEventListener('click', function () { start(token); });
  start(token);
})();
