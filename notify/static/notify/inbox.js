/*
 * <notify-inbox>: a drop-in in-app inbox for Notify. Plain JavaScript, no framework and
 * no build step: load this file, put the element on the page, give it a user token.
 *
 *   <script src="https://notify.example/static/notify/inbox.js" defer></script>
 *   <notify-inbox api-base="https://notify.example" user-id="u-42" token="ut_..."></notify-inbox>
 *
 * Attributes: api-base (default: this page's origin), user-id, token (an end-user token
 * the product's backend minted with POST /v1/users/{user_id}/tokens), page-size
 * (entries per page; default: the server's), preferences-url (optional link to the hosted
 * preference center, shown at the foot of the preferences tab), lang (the language to show;
 * default: the person's own as Notify knows it, else the page's, else English — the
 * catalogs are STRINGS below; a page may add one as NotifyInbox.strings[tag]).
 *
 * Events (bubbling, composed), all named `notify-inbox:*`:
 *   token-expired  the API refused the token: set a fresh one (`el.token = ...`) and the
 *                  inbox carries on with it (what failed is tried again)
 *   notification   a new entry arrived live (detail.entry)
 *   unread-count   the badge changed (detail.count; null when the count is unavailable)
 *   open-entry     an entry's link is about to open (detail.entry, detail.url); cancelable:
 *                  preventDefault() and route it yourself
 *   stream         the live stream's state changed (detail.state: connecting | open |
 *                  waiting, detail.retryMs when waiting, detail.status of a refusal)
 * See docs/inbox.md.
 */
(() => {
  "use strict";

  if (window.customElements.get("notify-inbox")) return;

  const DEFAULT_RETRY_MS = 3000; // until the server's `retry:` says otherwise
  const MAX_BACKOFF_MS = 60000; // network failures without advice double up to this
  const MAX_REST_RETRIES = 3; // a REST call refused with 429 is tried again this often
  const COUNT_READS_MAX = 3; // an unread count read again while entries keep arriving

  const STYLE = `
    :host { position: relative; display: inline-block; font: 14px/1.4 system-ui, sans-serif;
            color: #1f2328; --notify-accent: #0b57d0; }
    [hidden] { display: none !important; }
    button { font: inherit; cursor: pointer; }
    :focus-visible { outline: 2px solid var(--notify-accent); outline-offset: 2px; }
    .bell { position: relative; background: none; border: 1px solid transparent; border-radius: 8px;
            padding: 6px; color: inherit; line-height: 0; }
    .bell:hover { background: #0000000d; }
    .bell svg { width: 24px; height: 24px; }
    .badge { position: absolute; top: 0; right: 0; min-width: 18px; height: 18px; padding: 0 5px;
             box-sizing: border-box; border-radius: 9px; background: #c5221f; color: #fff;
             font-size: 11px; font-weight: 600; line-height: 18px; text-align: center; }
    .panel { position: absolute; right: 0; top: calc(100% + 6px); z-index: 1000; width: 360px;
             max-width: 92vw; max-height: 520px; display: flex; flex-direction: column;
             background: #fff; border: 1px solid #d0d7de; border-radius: 10px;
             box-shadow: 0 8px 24px #0000002e; overflow: hidden; }
    .head { display: flex; align-items: center; gap: 8px; padding: 8px 10px;
            border-bottom: 1px solid #d0d7de; }
    .tabs { display: flex; gap: 4px; flex: 1; }
    [role=tab] { background: none; border: 0; border-bottom: 2px solid transparent; padding: 6px 8px; }
    [role=tab][aria-selected=true] { border-bottom-color: var(--notify-accent); font-weight: 600; }
    .link { background: none; border: 0; color: var(--notify-accent); padding: 4px; }
    .link:disabled { color: #8c959f; cursor: default; }
    .body { overflow-y: auto; flex: 1; }
    ul { list-style: none; margin: 0; padding: 0; }
    li { display: flex; gap: 8px; padding: 10px 12px; border-bottom: 1px solid #eaeef2; }
    li.unread { background: #f2f7ff; }
    .dot { flex: none; width: 8px; height: 8px; margin-top: 6px; border-radius: 50%; }
    li.unread .dot { background: var(--notify-accent); }
    .text { flex: 1; min-width: 0; }
    .title { font-weight: 600; overflow-wrap: anywhere; }
    .title a { color: inherit; text-decoration: none; }
    .title a:hover, .title a:focus-visible { text-decoration: underline; }
    .entry-body { color: #424a53; overflow-wrap: anywhere; }
    time { color: #656d76; font-size: 12px; }
    .empty, .status { padding: 24px 16px; text-align: center; color: #656d76; }
    .status.error { color: #c5221f; }
    .more { display: block; width: 100%; padding: 10px; border: 0; background: none;
            color: var(--notify-accent); }
    .prefs { overflow-x: auto; }
    table { width: 100%; border-collapse: collapse; font-size: 13px; }
    th, td { padding: 6px 4px; text-align: left; border-bottom: 1px solid #eaeef2; }
    thead th { font-size: 12px; font-weight: 600; color: #424a53; white-space: nowrap; }
    td.cell, th.cell { text-align: center; }
    .lock, .about { font-size: 11px; color: #656d76; font-weight: normal; display: block; }
    fieldset { border: 0; margin: 8px 0; padding: 0 8px; }
    .quiet { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
    .pairs { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 6px 8px;
             align-items: center; margin: 4px 0; }
    .pairs input, .pairs select { font: inherit; min-width: 0; }
    .prefs-foot { padding: 8px; }
    .sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0);
          white-space: nowrap; }
  `;

  const BELL = `<svg viewBox="0 0 24 24" aria-hidden="true" focusable="false"><path fill="currentColor"
    d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22Zm7-6V11a7 7 0 0 0-5.5-6.84V3.5a1.5 1.5 0 0 0-3 0v.66A7 7 0 0 0 5 11v5l-2 2v1h18v-1l-2-2Z"/></svg>`;

  /** Raised when the server refused the token (401): the host is asked for a new one. */
  class TokenExpired extends Error {}

  /** A refusal that is not about the token, with the server's error body when it has one. */
  class ApiFailure extends Error {
    constructor(status, message, error) {
      super(message);
      this.status = status;
      this.code = (error && error.code) || ""; // the error body's code and field: what the
      this.field = (error && error.field) || ""; // person is told is chosen from them
    }
  }

  const sleep = (ms, signal) =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      if (signal) signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
    });

  /** Milliseconds from a Retry-After header (seconds or an HTTP date), else null. */
  function retryAfterMs(response) {
    const raw = response.headers.get("Retry-After");
    if (!raw) return null;
    const seconds = Number(raw);
    if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
    const when = Date.parse(raw);
    return Number.isNaN(when) ? null : Math.max(0, when - Date.now());
  }

  /** Feed order: latest event first, ties by arrival (higher id first). */
  function newerFirst(a, b) {
    const byTime = Date.parse(b.occurred_at) - Date.parse(a.occurred_at);
    return byTime || b.id - a.id;
  }

  // Every string the component shows or says, one catalog per language (docs/inbox.md,
  // "Adding a language"). `{name}` is filled in; an entry that is an object holds the forms
  // by the language's plural rule (Intl.PluralRules: one, few, many, other) of `{count}`.
  // A string missing from a catalog is taken from English. Kept here, not fetched: the
  // component makes no request for its own words.
  const STRINGS = {
    en: {
      notifications: "Notifications",
      bellNone: "Notifications, none unread",
      bellUnread: "Notifications, {count} unread",
      sections: "Inbox sections",
      tabInbox: "Inbox",
      tabPrefs: "Preferences",
      markAll: "Mark all as read",
      empty: "You're all caught up: no notifications yet.",
      more: "Load older notifications",
      unreadPrefix: "Unread: ",
      markRead: "Mark read",
      markReadLabel: "Mark “{title}” as read",
      newEntry: "New notification: {title}",
      loadFailed: "Notifications could not be loaded.",
      unavailable: "Notifications are not available here.",
      loading: "Loading…",
      prefsFailed: "Your settings could not be loaded.",
      saving: "Saving…",
      saved: "Saved: {what}.",
      saveFailed: "That could not be saved. Please try again.",
      mandatory: "This category is required for your account and stays on.",
      prefsCaption: "Which notifications you get, on which channel",
      category: "Category",
      required: "Required",
      cell: "{category} by {channel}",
      cellRequired: "{category} by {channel} (required)",
      cellOn: "{category} by {channel} on",
      cellOff: "{category} by {channel} off",
      quietLegend: "Quiet hours (no marketing; your time zone)",
      quietFrom: "From",
      quietTo: "to",
      quietSave: "Save quiet hours",
      quietBoth: "Give both times.",
      quietWhat: "quiet hours",
      zoneLegend: "Time zone and language",
      zone: "Time zone",
      language: "Language",
      zoneHint: "A time zone name such as Europe/Berlin",
      zoneSave: "Save time zone and language",
      zoneMissing: "Give a time zone, such as Europe/Berlin.",
      zoneUnknown: "Unknown time zone: choose one from the list, such as Europe/Berlin.",
      zoneWhat: "time zone and language",
      notSet: "Not set",
      allSettings: "All notification settings",
      channel_inapp: "In-app",
      channel_email: "Email",
      channel_webpush: "Browser",
      channel_fcm: "Mobile",
      channel_sms: "SMS",
    },
    ru: {
      notifications: "Уведомления",
      bellNone: "Уведомления, непрочитанных нет",
      bellUnread: {
        one: "Уведомления, {count} непрочитанное",
        few: "Уведомления, {count} непрочитанных",
        many: "Уведомления, {count} непрочитанных",
        other: "Уведомления, {count} непрочитанного",
      },
      sections: "Разделы уведомлений",
      tabInbox: "Входящие",
      tabPrefs: "Настройки",
      markAll: "Прочитать все",
      empty: "Вы всё просмотрели: уведомлений пока нет.",
      more: "Показать более ранние",
      unreadPrefix: "Не прочитано: ",
      markRead: "Прочитано",
      markReadLabel: "Отметить «{title}» как прочитанное",
      newEntry: "Новое уведомление: {title}",
      loadFailed: "Не удалось загрузить уведомления.",
      unavailable: "Уведомления здесь недоступны.",
      loading: "Загрузка…",
      prefsFailed: "Не удалось загрузить ваши настройки.",
      saving: "Сохранение…",
      saved: "Сохранено: {what}.",
      saveFailed: "Не удалось сохранить. Попробуйте ещё раз.",
      mandatory: "Эта категория нужна для вашей учётной записи и остаётся включённой.",
      prefsCaption: "Какие уведомления вы получаете и по каким каналам",
      category: "Категория",
      required: "Обязательно",
      cell: "{category}: {channel}",
      cellRequired: "{category}: {channel} (обязательно)",
      cellOn: "{category}: {channel} — включено",
      cellOff: "{category}: {channel} — выключено",
      quietLegend: "Тихие часы (без рекламы; по вашему часовому поясу)",
      quietFrom: "С",
      quietTo: "до",
      quietSave: "Сохранить тихие часы",
      quietBoth: "Укажите оба времени.",
      quietWhat: "тихие часы",
      zoneLegend: "Часовой пояс и язык",
      zone: "Часовой пояс",
      language: "Язык",
      zoneHint: "Название часового пояса, например Europe/Moscow",
      zoneSave: "Сохранить часовой пояс и язык",
      zoneMissing: "Укажите часовой пояс, например Europe/Moscow.",
      zoneUnknown: "Неизвестный часовой пояс: выберите его из списка, например Europe/Moscow.",
      zoneWhat: "часовой пояс и язык",
      notSet: "Не выбран",
      allSettings: "Все настройки уведомлений",
      channel_inapp: "В приложении",
      channel_email: "Эл. почта",
      channel_webpush: "Браузер",
      channel_fcm: "Мобильное",
      channel_sms: "SMS",
    },
  };

  /** The catalog a language tag picks (`ru-RU` → ru), or null when there is none. */
  function catalogFor(tag) {
    if (typeof tag !== "string" || !tag.trim()) return null;
    const lower = tag.trim().replace(/_/g, "-").toLowerCase();
    if (Object.prototype.hasOwnProperty.call(STRINGS, lower)) return lower;
    const primary = lower.split("-")[0];
    return Object.prototype.hasOwnProperty.call(STRINGS, primary) ? primary : null;
  }

  /** A catalog's string with `{name}`s filled in (a plural entry by `{count}`). */
  function translate(language, key, values = {}) {
    let entry = (STRINGS[language] || {})[key];
    if (entry === undefined) entry = STRINGS.en[key];
    if (entry === undefined) return key;
    if (typeof entry === "object") {
      const form = new Intl.PluralRules(language).select(Number(values.count) || 0);
      entry = entry[form] || entry.other;
    }
    return entry.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
  }

  const LOCK = `<svg viewBox="0 0 16 16" width="11" height="11" aria-hidden="true" focusable="false">
    <path fill="currentColor" d="M4 7V5a4 4 0 0 1 8 0v2h1v8H3V7h1Zm2 0h4V5a2 2 0 0 0-4 0v2Z"/></svg>`;

  let instances = 0; // gives each element's inner ids a suffix of their own

  // The link an entry may carry, or null: an absolute http(s) URL or a path on the page's
  // own site, nothing else (the rule of notify/links.py, which the server applies when it
  // writes the entry; this holds for an entry written before, or by another path). Edges
  // are trimmed as a browser trims them; a control character left, another scheme
  // (`javascript:`, `data:`, any case) or a protocol-relative `//host` gets no link.
  function safeLink(url) {
    if (typeof url !== "string") return null;
    const text = url.replace(/^[\u0000-\u0020\s]+|[\u0000-\u0020\s]+$/g, "");
    if (!text || /[\u0000-\u001f\u007f]/.test(text) || /^[\/\\]{2}/.test(text)) return null;
    const scheme = /^([a-z][a-z0-9+.\-]*):/i.exec(text);
    if (scheme && !/^https?$/i.test(scheme[1])) return null;
    try {
      // The browser's own reading must agree: a link that resolves elsewhere is refused.
      if (!/^https?:$/.test(new URL(text, document.baseURI).protocol)) return null;
    } catch (error) {
      return null;
    }
    return text;
  }

  function label(key) {
    const words = String(key).replace(/[._-]+/g, " ").trim();
    return words.charAt(0).toUpperCase() + words.slice(1);
  }

  class NotifyInbox extends HTMLElement {
    /** The string catalogs, by language tag: a page may add one (docs/inbox.md). */
    static get strings() {
      return STRINGS;
    }

    static get observedAttributes() {
      return ["token", "user-id", "api-base", "stream-base", "page-size", "preferences-url", "lang"];
    }

    constructor() {
      super();
      this._entries = [];
      this._nextCursor = null;
      this._feedLoaded = false;
      this._unread = null;
      this._countReads = 0; // unread-count reads in flight
      this._countMissed = false; // an unread entry arrived during one
      this._lastEventId = null;
      this._retryMs = DEFAULT_RETRY_MS;
      this._streamState = "idle";
      this._run = null; // AbortController of the current session (feed + stream)
      this._tokenWaiters = [];
      this._prefs = null;
      this._personLocale = ""; // the person's language and zone, as Notify's answers say
      this._personZone = "";
      this._lang = "en";
      instances += 1;
      this._idSeq = instances;
      this.attachShadow({ mode: "open" });
      this._render();
    }

    // --- Public API ------------------------------------------------------------------

    get token() { return this.getAttribute("token") || ""; }
    set token(value) { this.setAttribute("token", value || ""); }

    /** The unread count the badge shows (null while unknown). */
    get unreadCount() { return this._unread; }

    /** connecting | open | waiting | idle */
    get streamState() { return this._streamState; }

    get open() { return !this._panel.hidden; }

    /** Show the panel, focus on its selected tab. */
    show() {
      if (this.open) return;
      this._panel.hidden = false;
      this._bell.setAttribute("aria-expanded", "true");
      this._selectTab("feed", { focus: false });
      const first = this._panel.querySelector("[role=tab][aria-selected=true]");
      if (first) first.focus();
    }

    /** Hide the panel; focus goes back to the bell unless told otherwise. */
    hide({ focusBell = true } = {}) {
      if (!this.open) return;
      this._panel.hidden = true;
      this._bell.setAttribute("aria-expanded", "false");
      if (focusBell) this._bell.focus();
    }

    // --- Lifecycle -------------------------------------------------------------------

    connectedCallback() {
      // A token set as a property before this script defined the element sits on the
      // instance and would hide the accessor: take it over.
      if (Object.prototype.hasOwnProperty.call(this, "token")) {
        const early = this.token;
        delete this.token;
        this.token = early;
      }
      this._onOnline = () => { if (this._streamState === "waiting") this._wakeStream(); };
      window.addEventListener("online", this._onOnline);
      // A click elsewhere on the page closes the panel (focus stays where it went).
      this._onOutside = (event) => {
        if (this.open && !event.composedPath().includes(this)) this.hide({ focusBell: false });
      };
      document.addEventListener("click", this._onOutside);
      this._start();
    }

    disconnectedCallback() {
      window.removeEventListener("online", this._onOnline);
      document.removeEventListener("click", this._onOutside);
      this._stop();
    }

    attributeChangedCallback(name, oldValue, newValue) {
      if (oldValue === newValue) return;
      if (name === "token") {
        const waiters = this._tokenWaiters.splice(0);
        waiters.forEach((resolve) => resolve());
        if (!this._run && this.isConnected) this._start();
        return;
      }
      if (name === "preferences-url") { this._renderPrefsLink(); return; }
      if (name === "lang") { this._applyLanguage(); return; }
      // Another person or server while running: start over (not at the first upgrade).
      if (this._run && (name === "user-id" || name === "api-base")) {
        this._stop();
        this._start();
      }
    }

    _ready() {
      return Boolean(this.getAttribute("user-id") && this.token);
    }

    _start() {
      if (this._run || !this._ready()) return;
      this._run = new AbortController();
      const signal = this._run.signal;
      this._entries = [];
      this._nextCursor = null;
      this._feedLoaded = false;
      this._lastEventId = null;
      this._renderFeed();
      // The first page decides where the stream starts, so nothing falls in between.
      this._loadPage({ first: true })
        .catch((error) => this._reportError(error))
        .finally(() => { if (!signal.aborted) this._streamLoop(signal); });
    }

    _stop() {
      if (!this._run) return;
      this._run.abort();
      this._run = null;
      this._setStreamState("idle");
    }

    // --- HTTP ------------------------------------------------------------------------

    _url(path) {
      // The live stream may be served apart from the API (its own process behind one
      // proxy rule, or its own port in local development): `stream-base` says where.
      const stream = path === "/stream" ? this.getAttribute("stream-base") : "";
      const base = (stream || this.getAttribute("api-base") || window.location.origin)
        .replace(/\/+$/, "");
      return `${base}/v1/users/${encodeURIComponent(this.getAttribute("user-id"))}${path}`;
    }

    /** Resolves once the host page sets a new token (after a token-expired event). */
    _newToken() {
      return new Promise((resolve) => {
        this._tokenWaiters.push(resolve);
        this._emit("token-expired", { userId: this.getAttribute("user-id") });
      });
    }

    /**
     * One API call with the current token. A 401 asks the host for a new token and tries
     * again with it; a 429 waits as Retry-After says and tries again (a few times).
     */
    async _api(path, { method = "GET", body, signal, keepalive = false } = {}) {
      let refusals = 0;
      for (;;) {
        const token = this.token;
        const response = await fetch(this._url(path), {
          method,
          signal,
          keepalive,
          headers: {
            Authorization: `Bearer ${token}`,
            Accept: "application/json",
            ...(body === undefined ? {} : { "Content-Type": "application/json" }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        if (response.status === 401) {
          await response.text();
          if (this.token === token) await this._newToken();
          continue;
        }
        if (response.status === 429 && refusals < MAX_REST_RETRIES) {
          refusals += 1;
          await response.text();
          await sleep(retryAfterMs(response) ?? DEFAULT_RETRY_MS, signal);
          if (signal && signal.aborted) throw new DOMException("aborted", "AbortError");
          continue;
        }
        const data = await response.json().catch(() => null);
        if (!response.ok) {
          const message = (data && data.error && data.error.message) || `HTTP ${response.status}`;
          throw new ApiFailure(response.status, message, data && data.error);
        }
        return data;
      }
    }

    // --- Feed ------------------------------------------------------------------------

    async _loadPage({ first = false } = {}) {
      const signal = this._run && this._run.signal;
      // Without page-size the server's own default applies (NOTIFY_FEED_PAGE_SIZE).
      const query = new URLSearchParams();
      if (this.getAttribute("page-size")) query.set("limit", this.getAttribute("page-size"));
      if (!first && this._nextCursor) query.set("cursor", this._nextCursor);
      const path = query.toString() ? `/feed?${query}` : "/feed";
      this._moreButton.disabled = true;
      try {
        const page = await this._api(path, { signal });
        if (first) {
          this._entries = [];
          // The stream replays everything after this id: an entry written between this
          // page and the stream's start still arrives. An empty feed starts from 0.
          this._lastEventId = page.results.reduce((top, entry) => Math.max(top, entry.id), 0);
        }
        this._person(page.locale, page.timezone);
        for (const entry of page.results) this._upsert(entry);
        this._nextCursor = page.next_cursor;
        this._feedLoaded = true;
        this._status("");
        this._renderFeed();
        if (first) await this._refreshCount();
      } finally {
        this._moreButton.disabled = false;
      }
    }

    _upsert(entry) {
      const index = this._entries.findIndex((known) => known.id === entry.id);
      if (index >= 0) { this._entries[index] = entry; return false; }
      this._entries.push(entry);
      this._entries.sort(newerFirst);
      return true;
    }

    async _refreshCount() {
      // An entry that arrives while the count is read may or may not be in it (a
      // reconnect's replay races the read): such entries do not change the count, they
      // make it read again, after them.
      const signal = this._run && this._run.signal;
      this._countReads += 1;
      try {
        for (let tries = 1; ; tries++) {
          this._countMissed = false;
          const data = await this._api("/unread-count", { signal });
          if (!this._countMissed || tries >= COUNT_READS_MAX) {
            this._setUnread(data.available === false ? null : data.count);
            return;
          }
        }
      } finally {
        this._countReads -= 1;
      }
    }

    async _markRead(ids) {
      const body = ids ? { ids } : { all: true };
      // keepalive: a mark-read sent as a link navigates away still reaches the server.
      const data = await this._api("/feed/read", { method: "POST", body, keepalive: true });
      const now = new Date().toISOString();
      for (const entry of this._entries) {
        if (!entry.read_at && (!ids || ids.includes(entry.id))) entry.read_at = now;
      }
      if (this._unread !== null) this._setUnread(Math.max(0, this._unread - data.marked));
      this._renderFeed();
      if (!ids) await this._refreshCount(); // all: the server's count is the truth
    }

    // --- Live stream (SSE over fetch: EventSource cannot send the Authorization header) --

    async _streamLoop(signal) {
      let failures = 0;
      while (!signal.aborted) {
        let waitMs;
        try {
          const outcome = await this._streamOnce(signal);
          if (outcome.kind === "refused") {
            waitMs = outcome.retryMs;
            this._setStreamState("waiting", { retryMs: waitMs, status: outcome.status });
          } else {
            failures = 0;
            waitMs = this._retryMs; // the server ended the stream: come back as `retry:` says
            this._setStreamState("waiting", { retryMs: waitMs });
          }
        } catch (error) {
          if (signal.aborted) break;
          if (error instanceof TokenExpired) continue; // a new token is set: reconnect now
          if (error instanceof ApiFailure) {
            this._reportError(error);
            this._setStreamState("idle", { status: error.status });
            return; // forbidden or unknown user: reconnecting would not help
          }
          failures += 1; // network gone or cut: back off from the advised delay
          waitMs = Math.min(this._retryMs * 2 ** (failures - 1), MAX_BACKOFF_MS);
          this._setStreamState("waiting", { retryMs: waitMs });
        }
        await this._waitForReconnect(waitMs, signal);
      }
    }

    _waitForReconnect(ms, signal) {
      return new Promise((resolve) => {
        const timer = setTimeout(done, ms);
        this._wakeStream = done;
        signal.addEventListener("abort", done, { once: true });
        function done() { clearTimeout(timer); resolve(); }
      });
    }

    _wakeStream() {}

    /** One connection: resolves when the server ends it or refuses it with advice. */
    async _streamOnce(signal) {
      this._setStreamState("connecting");
      const token = this.token;
      const headers = { Authorization: `Bearer ${token}`, Accept: "text/event-stream" };
      if (this._lastEventId !== null) headers["Last-Event-ID"] = String(this._lastEventId);
      const response = await fetch(this._url("/stream"), { headers, signal, cache: "no-store" });
      if (response.status === 401) {
        await response.text();
        if (this.token === token) await this._newToken();
        throw new TokenExpired();
      }
      if (response.status === 429 || response.status === 503) {
        await response.text();
        // The refusal carries the same advice as the stream's `retry:` field, in seconds.
        return { kind: "refused", status: response.status, retryMs: retryAfterMs(response) ?? this._retryMs };
      }
      if (!response.ok || !response.body) {
        const data = await response.json().catch(() => null);
        const message = (data && data.error && data.error.message) || `HTTP ${response.status}`;
        throw new ApiFailure(response.status, message, data && data.error);
      }
      this._setStreamState("open");
      if (this._feedLoaded) {
        // A reconnect may follow reads done elsewhere: the count is read again.
        this._refreshCount().catch((error) => this._reportError(error));
      } else {
        // The first page failed before (the network was away): load it now.
        this._loadPage({ first: true }).catch((error) => this._reportError(error));
      }
      await this._readEvents(response.body, signal);
      return { kind: "ended" };
    }

    async _readEvents(body, signal) {
      const reader = body.pipeThrough(new TextDecoderStream()).getReader();
      signal.addEventListener("abort", () => reader.cancel().catch(() => {}), { once: true });
      let buffer = "";
      let event = { type: "message", data: [], id: null };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += value;
        let newline;
        while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
          if (line === "") {
            if (event.data.length) this._dispatchEvent(event);
            event = { type: "message", data: [], id: null };
            continue;
          }
          if (line.startsWith(":")) continue; // a comment: heartbeat
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? "" : line.slice(colon + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (field === "data") event.data.push(value);
          else if (field === "event") event.type = value;
          else if (field === "id") event.id = value;
          else if (field === "retry" && /^\d+$/.test(value)) this._retryMs = Number(value);
        }
      }
    }

    _dispatchEvent(event) {
      if (event.type !== "feed") return;
      let entry;
      try { entry = JSON.parse(event.data.join("\n")); } catch { return; }
      const id = Number(event.id || entry.id);
      if (Number.isFinite(id)) this._lastEventId = Math.max(this._lastEventId || 0, id);
      const oldest = this._entries[this._entries.length - 1];
      // Older than every loaded entry while more pages exist: paging will bring it.
      if (this._nextCursor && oldest && newerFirst(entry, oldest) > 0) return;
      const added = this._upsert(entry);
      if (!added) return;
      this._feedLoaded = true;
      if (!entry.read_at) {
        if (this._countReads > 0) this._countMissed = true;
        else if (this._unread !== null) this._setUnread(this._unread + 1);
      }
      this._renderFeed();
      this._announce(this._t("newEntry", { title: entry.title }));
      this._emit("notification", { entry });
    }

    // --- Preferences -------------------------------------------------------------------

    async _loadPrefs() {
      this._prefsStatus(this._t("loading"));
      try {
        this._prefs = await this._api("/preferences", { signal: this._run && this._run.signal });
        this._prefsStatus("");
        this._person(this._prefs.locale, this._prefs.timezone);
        this._renderPrefs();
      } catch (error) {
        if (error.name !== "AbortError") this._prefsStatus(this._failureText(error, "prefsFailed"), true);
      }
    }

    /** Save a change; `what()` names it in the words of the language shown once saved. */
    async _savePrefs(body, what, { keepTyped = false } = {}) {
      this._prefsStatus(this._t("saving"));
      let saved = false;
      try {
        this._prefs = await this._api("/preferences", { method: "PUT", body });
        saved = true;
      } catch (error) {
        this._prefsStatus(this._failureText(error, "saveFailed"), true);
        // Typed text the server refused stays in its field, to be corrected.
        if (keepTyped) return false;
      }
      // Redrawn from the server's answer (a refused change flips back), in the language it
      // names (a language just chosen shows at once); focus stays put.
      const focused = this.shadowRoot.activeElement;
      const key = focused && focused.dataset && focused.dataset.focusKey;
      if (saved) this._person(this._prefs.locale, this._prefs.timezone);
      this._renderPrefs();
      if (saved) this._prefsStatus(this._t("saved", { what: what() }));
      const again = key && this.shadowRoot.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
      if (again) again.focus();
    }

    // --- Rendering ---------------------------------------------------------------------

    _render() {
      const n = this._idSeq;
      this.shadowRoot.innerHTML = `
        <style>${STYLE}</style>
        <button class="bell" part="bell" type="button" aria-haspopup="dialog" aria-expanded="false"
                aria-controls="panel-${n}">${BELL}
          <span class="badge" part="badge" hidden aria-hidden="true"></span>
        </button>
        <div class="panel" id="panel-${n}" part="panel" role="dialog" data-t-label="notifications" hidden>
          <div class="head">
            <div class="tabs" role="tablist" data-t-label="sections">
              <button type="button" role="tab" id="tab-feed-${n}" data-tab="feed" aria-controls="feed-${n}"
                      aria-selected="true" data-t="tabInbox"></button>
              <button type="button" role="tab" id="tab-prefs-${n}" data-tab="prefs" aria-controls="prefs-${n}"
                      aria-selected="false" tabindex="-1" data-t="tabPrefs"></button>
            </div>
            <button type="button" class="link mark-all" data-t="markAll"></button>
          </div>
          <div class="body" role="tabpanel" id="feed-${n}" aria-labelledby="tab-feed-${n}" data-panel="feed">
            <div class="status" role="status" hidden></div>
            <ul data-t-label="notifications"></ul>
            <p class="empty" hidden data-t="empty"></p>
            <button type="button" class="more" hidden data-t="more"></button>
          </div>
          <div class="body" role="tabpanel" id="prefs-${n}" aria-labelledby="tab-prefs-${n}" data-panel="prefs" hidden>
            <div class="status prefs-status" role="status" hidden></div>
            <div class="prefs"></div>
            <div class="prefs-foot"></div>
          </div>
        </div>
        <div class="sr live" aria-live="polite"></div>`;
      const root = this.shadowRoot;
      this._bell = root.querySelector(".bell");
      this._badge = root.querySelector(".badge");
      this._panel = root.querySelector(".panel");
      this._list = root.querySelector("ul");
      this._empty = root.querySelector(".empty");
      this._moreButton = root.querySelector(".more");
      this._markAllButton = root.querySelector(".mark-all");
      this._statusBox = root.querySelector(".status");
      this._live = root.querySelector(".live");

      this._bell.addEventListener("click", () => (this.open ? this.hide() : this.show()));
      this._markAllButton.addEventListener("click", () =>
        this._markRead(null).catch((error) => this._reportError(error)));
      this._moreButton.addEventListener("click", () =>
        this._loadPage().catch((error) => this._reportError(error)));
      root.querySelectorAll("[role=tab]").forEach((tab) =>
        tab.addEventListener("click", () => this._selectTab(tab.dataset.tab, { focus: true })));
      root.querySelector("[role=tablist]").addEventListener("keydown", (event) => this._tabKeys(event));
      // On the host: a key pressed anywhere inside the component reaches it.
      this.addEventListener("keydown", (event) => {
        if (event.key === "Escape" && this.open) { event.stopPropagation(); this.hide(); }
      });
      this._list.addEventListener("click", (event) => this._onListClick(event));
      this._lang = this._language();
      this._applyStrings();
      this._renderBadge();
      this._renderPrefsLink();
    }

    // --- Language ----------------------------------------------------------------------

    /** The language shown: the element's `lang`, else the person's (Notify's answers say
     *  it), else the page's, else English; the first of them with a catalog. */
    _language() {
      for (const tag of [this.getAttribute("lang"), this._personLocale, document.documentElement.lang]) {
        const found = catalogFor(tag);
        if (found) return found;
      }
      return "en";
    }

    _t(key, values) {
      return translate(this._lang, key, values);
    }

    _channelLabel(channel) {
      const key = `channel_${channel}`;
      return key in STRINGS.en ? this._t(key) : label(channel); // an unknown one: its key
    }

    /** Take the person's language and time zone from an answer of Notify's. */
    _person(locale, timezone) {
      if (typeof timezone === "string" && timezone !== this._personZone) {
        this._personZone = timezone;
        this._renderFeed(); // the entries' times are shown in it
      }
      if (typeof locale === "string" && locale !== this._personLocale) {
        this._personLocale = locale;
        this._applyLanguage();
      }
    }

    _applyLanguage() {
      const language = this._language();
      if (language === this._lang) return;
      this._lang = language;
      this._applyStrings();
      this._renderBadge();
      this._renderFeed();
      this._renderPrefs();
      this._renderPrefsLink();
    }

    /** The fixed words of the markup, in the language shown. */
    _applyStrings() {
      this._fill(this.shadowRoot);
      for (const node of [this._bell, this._panel, this._live]) node.lang = this._lang;
    }

    /** Put the words into markup's `data-t` (text) and `data-t-label` (aria-label) nodes. */
    _fill(root) {
      for (const node of root.querySelectorAll("[data-t]")) node.textContent = this._t(node.dataset.t);
      for (const node of root.querySelectorAll("[data-t-label]")) {
        node.setAttribute("aria-label", this._t(node.dataset.tLabel));
      }
    }

    /** What to tell the person about a failed call, in their language (the server's own
     *  message is for developers, in English). */
    _failureText(error, fallback) {
      if (!(error instanceof ApiFailure)) return this._t(fallback);
      if (error.code === "mandatory_category") return this._t("mandatory");
      if (error.field === "timezone") return this._t("zoneUnknown");
      if (error.status === 403 || error.status === 404) return this._t("unavailable");
      return this._t(fallback);
    }

    _selectTab(name, { focus }) {
      this.shadowRoot.querySelectorAll("[role=tab]").forEach((tab) => {
        const selected = tab.dataset.tab === name;
        tab.setAttribute("aria-selected", String(selected));
        tab.tabIndex = selected ? 0 : -1;
        if (selected && focus) tab.focus();
      });
      this.shadowRoot.querySelectorAll("[role=tabpanel]").forEach((panel) => {
        panel.hidden = panel.dataset.panel !== name;
      });
      this._markAllButton.hidden = name !== "feed";
      if (name === "prefs" && this._ready()) this._loadPrefs();
    }

    _tabKeys(event) {
      const tabs = [...this.shadowRoot.querySelectorAll("[role=tab]")];
      const at = tabs.indexOf(this.shadowRoot.activeElement);
      if (at < 0) return;
      let next = null;
      if (event.key === "ArrowRight") next = (at + 1) % tabs.length;
      else if (event.key === "ArrowLeft") next = (at - 1 + tabs.length) % tabs.length;
      else if (event.key === "Home") next = 0;
      else if (event.key === "End") next = tabs.length - 1;
      if (next === null) return;
      event.preventDefault();
      this._selectTab(tabs[next].dataset.tab, { focus: true });
    }

    _renderBadge() {
      const count = this._unread;
      if (count === null || count === 0) {
        this._badge.hidden = true;
        this._bell.setAttribute("aria-label", this._t(count === 0 ? "bellNone" : "notifications"));
      } else {
        this._badge.hidden = false;
        this._badge.textContent = count > 99 ? "99+" : String(count);
        this._bell.setAttribute("aria-label", this._t("bellUnread", { count }));
      }
      this._markAllButton.disabled = count === 0;
    }

    _setUnread(count) {
      if (count === this._unread) return;
      this._unread = count;
      this._renderBadge();
      this._emit("unread-count", { count });
    }

    _renderFeed() {
      const list = this._list;
      // Redrawn whole: the focused entry control (or its entry) keeps the focus.
      const active = this.shadowRoot.activeElement;
      const item = active && list.contains(active) ? active.closest("li") : null;
      const keep = item && { id: item.dataset.id, action: active.dataset.action };
      list.textContent = "";
      for (const entry of this._entries) list.appendChild(this._entryItem(entry));
      if (keep) {
        const again = list.querySelector(`li[data-id="${CSS.escape(keep.id)}"]`);
        const target = again && (again.querySelector(`[data-action="${keep.action}"]`)
          || again.querySelector("a, button"));
        if (target) target.focus();
      }
      this._empty.hidden = !(this._feedLoaded && this._entries.length === 0);
      this._moreButton.hidden = !this._nextCursor;
    }

    _entryItem(entry) {
      const item = document.createElement("li");
      item.dataset.id = String(entry.id);
      item.className = entry.read_at ? "read" : "unread";
      const dot = document.createElement("span");
      dot.className = "dot";
      dot.setAttribute("aria-hidden", "true");
      const text = document.createElement("div");
      text.className = "text";
      const title = document.createElement("div");
      title.className = "title";
      const state = entry.read_at ? "" : this._t("unreadPrefix");
      const href = safeLink(entry.url);
      if (href) {
        const link = document.createElement("a");
        link.href = href;
        link.textContent = entry.title;
        link.dataset.action = "open";
        if (state) link.setAttribute("aria-label", state + entry.title);
        title.appendChild(link);
      } else {
        title.textContent = entry.title;
        if (state) {
          const said = document.createElement("span");
          said.className = "sr";
          said.textContent = state; // a catalog's words (a page may add catalogs): text only
          title.prepend(said);
        }
      }
      text.appendChild(title);
      if (entry.body) {
        const body = document.createElement("div");
        body.className = "entry-body";
        body.textContent = entry.body;
        text.appendChild(body);
      }
      const when = document.createElement("time");
      when.dateTime = entry.occurred_at;
      when.textContent = this._ago(entry.occurred_at);
      when.title = this._moment(entry.occurred_at);
      text.appendChild(when);
      item.append(dot, text);
      if (!entry.read_at) {
        const mark = document.createElement("button");
        mark.type = "button";
        mark.className = "link";
        mark.dataset.action = "read";
        mark.textContent = this._t("markRead");
        mark.setAttribute("aria-label", this._t("markReadLabel", { title: entry.title }));
        item.appendChild(mark);
      }
      return item;
    }

    _ago(iso) {
      const seconds = Math.round((Date.parse(iso) - Date.now()) / 1000);
      const format = new Intl.RelativeTimeFormat(this._lang, { numeric: "auto" });
      const steps = [[60, "second"], [60, "minute"], [24, "hour"], [7, "day"], [4.35, "week"], [12, "month"]];
      let value = seconds;
      for (const [size, unit] of steps) {
        if (Math.abs(value) < size) return format.format(Math.round(value), unit);
        value /= size;
      }
      return format.format(Math.round(value), "year");
    }

    /** A moment as the language shown writes it, in the person's time zone (else the browser's). */
    _moment(iso) {
      const options = { dateStyle: "medium", timeStyle: "short" };
      try {
        return new Date(iso).toLocaleString(this._lang, { ...options, timeZone: this._personZone || undefined });
      } catch {
        return new Date(iso).toLocaleString(this._lang, options); // a zone this browser lacks
      }
    }

    _onListClick(event) {
      const target = event.target.closest("[data-action]");
      if (!target) return;
      const item = target.closest("li");
      const entry = this._entries.find((known) => String(known.id) === item.dataset.id);
      if (!entry) return;
      if (target.dataset.action === "read") {
        const next = item.nextElementSibling || item.previousElementSibling;
        this._markRead([entry.id])
          .then(() => this._focusEntry(next ? next.dataset.id : null))
          .catch((error) => this._reportError(error));
        return;
      }
      // Opening a link: the host may route it itself; it is marked read either way.
      const proceed = this._emit("open-entry", { entry, url: target.href }, { cancelable: true });
      if (!entry.read_at) this._markRead([entry.id]).catch((error) => this._reportError(error));
      if (!proceed) event.preventDefault();
    }

    _focusEntry(id) {
      const item = id && this._list.querySelector(`li[data-id="${id}"]`);
      const target = item && item.querySelector("a, button");
      (target || this._markAllButton).focus();
    }

    _renderPrefs() {
      const box = this.shadowRoot.querySelector(".prefs");
      box.textContent = "";
      const prefs = this._prefs;
      if (!prefs) return;
      const categories = Object.keys(prefs.categories).sort();
      const channels = [...new Set(categories.flatMap((key) => Object.keys(prefs.categories[key])))].sort();
      const mandatory = new Set(prefs.mandatory || []);
      const table = document.createElement("table");
      const caption = document.createElement("caption");
      caption.className = "sr";
      caption.textContent = this._t("prefsCaption");
      table.appendChild(caption);
      const head = table.createTHead().insertRow();
      head.appendChild(Object.assign(document.createElement("th"), { textContent: this._t("category"), scope: "col" }));
      for (const channel of channels) {
        head.appendChild(Object.assign(document.createElement("th"), {
          textContent: this._channelLabel(channel), scope: "col", className: "cell" }));
      }
      const labels = prefs.labels || {};
      const tbody = table.createTBody();
      for (const key of categories) {
        const row = tbody.insertRow();
        // The category's name in the person's language, as Notify gives it (else its key).
        const title = (labels[key] && labels[key].label) || label(key);
        const name = Object.assign(document.createElement("th"), { textContent: title, scope: "row" });
        if (labels[key] && labels[key].description) {
          name.appendChild(Object.assign(document.createElement("span"), {
            className: "about", textContent: labels[key].description }));
        }
        if (mandatory.has(key)) {
          const lock = Object.assign(document.createElement("span"), { className: "lock" });
          lock.innerHTML = LOCK;
          lock.append(` ${this._t("required")}`);
          name.appendChild(lock);
        }
        row.appendChild(name);
        for (const channel of channels) {
          const cell = row.insertCell();
          cell.className = "cell";
          if (!(channel in prefs.categories[key])) continue;
          const box = document.createElement("input");
          box.type = "checkbox";
          box.checked = Boolean(prefs.categories[key][channel]);
          box.disabled = mandatory.has(key);
          box.dataset.category = key;
          box.dataset.channel = channel;
          box.dataset.focusKey = `${key}|${channel}`;
          const names = { category: title, channel: this._channelLabel(channel) };
          box.setAttribute("aria-label", this._t(mandatory.has(key) ? "cellRequired" : "cell", names));
          box.addEventListener("change", () => {
            const on = box.checked;
            this._savePrefs({ categories: { [key]: { [channel]: on } } },
              () => this._t(on ? "cellOn" : "cellOff", names));
          });
          cell.appendChild(box);
        }
      }
      box.appendChild(table);

      const quiet = prefs.quiet_hours || { start: "21:00", end: "09:00" };
      const fieldset = document.createElement("fieldset");
      fieldset.innerHTML = `<legend data-t="quietLegend"></legend>
        <div class="quiet">
          <label><span data-t="quietFrom"></span> <input type="time" class="q-start" required></label>
          <label><span data-t="quietTo"></span> <input type="time" class="q-end" required></label>
          <button type="button" class="link save-quiet" data-focus-key="quiet" data-t="quietSave"></button>
        </div>`;
      this._fill(fieldset);
      const start = fieldset.querySelector(".q-start");
      const end = fieldset.querySelector(".q-end");
      start.value = quiet.start;
      end.value = quiet.end;
      fieldset.querySelector(".save-quiet").addEventListener("click", () => {
        if (!start.value || !end.value) { this._prefsStatus(this._t("quietBoth"), true); return; }
        this._savePrefs({ quiet_hours: { start: start.value.slice(0, 5), end: end.value.slice(0, 5) } },
          () => this._t("quietWhat"));
      });
      box.appendChild(fieldset);
      box.appendChild(this._zoneAndLanguage(prefs));
    }

    /** Time zone (any IANA name, suggestions from the browser) and language (the server's list). */
    _zoneAndLanguage(prefs) {
      const n = this._idSeq;
      const fieldset = document.createElement("fieldset");
      fieldset.innerHTML = `<legend data-t="zoneLegend"></legend>
        <div class="pairs">
          <label for="zone-${n}" data-t="zone"></label>
          <input id="zone-${n}" class="zone" list="zones-${n}" autocomplete="off" spellcheck="false"
                 required aria-describedby="zone-hint-${n}" data-focus-key="zone-name">
          <label for="lang-${n}" data-t="language"></label>
          <select id="lang-${n}" class="lang" data-focus-key="language"></select>
        </div>
        <datalist id="zones-${n}"></datalist>
        <span class="sr" id="zone-hint-${n}" data-t="zoneHint"></span>
        <button type="button" class="link save-zone" data-focus-key="zone" data-t="zoneSave"></button>`;
      this._fill(fieldset);
      const zone = fieldset.querySelector(".zone");
      const lang = fieldset.querySelector(".lang");
      zone.value = prefs.timezone || "";
      const zones = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
      const list = fieldset.querySelector("datalist");
      for (const name of new Set(["UTC", ...zones])) list.appendChild(new Option(name, name));
      const named = typeof Intl.DisplayNames === "function";
      const choices = [...new Set([...(prefs.languages || []), prefs.locale || ""])].filter(Boolean);
      lang.appendChild(new Option(this._t("notSet"), ""));
      for (const tag of choices) {
        let name = tag;
        // Each language in its own words (Deutsch, Français), so a person finds theirs.
        try { if (named) name = new Intl.DisplayNames([tag], { type: "language" }).of(tag) || tag; } catch { /* keep the tag */ }
        lang.appendChild(new Option(name === tag ? tag : `${name} (${tag})`, tag));
      }
      lang.value = prefs.locale || "";
      const save = () => {
        const timezone = zone.value.trim();
        if (!timezone) { this._prefsStatus(this._t("zoneMissing"), true); zone.focus(); return; }
        zone.removeAttribute("aria-invalid");
        this._savePrefs({ timezone, locale: lang.value }, () => this._t("zoneWhat"), { keepTyped: true })
          .then((saved) => {
            if (saved !== false) return;
            const typed = this.shadowRoot.querySelector(".zone");
            if (typed) typed.setAttribute("aria-invalid", "true");
          });
      };
      fieldset.querySelector(".save-zone").addEventListener("click", save);
      zone.addEventListener("keydown", (event) => { if (event.key === "Enter") { event.preventDefault(); save(); } });
      return fieldset;
    }

    _renderPrefsLink() {
      if (!this.shadowRoot) return;
      const foot = this.shadowRoot.querySelector(".prefs-foot");
      if (!foot) return;
      foot.textContent = "";
      const url = this.getAttribute("preferences-url");
      if (!url) return;
      const link = Object.assign(document.createElement("a"), {
        href: url, textContent: this._t("allSettings"), target: "_blank", rel: "noopener" });
      foot.appendChild(link);
    }

    // --- Messages --------------------------------------------------------------------------

    _status(text, error = false) {
      this._statusBox.hidden = !text;
      this._statusBox.textContent = text;
      this._statusBox.classList.toggle("error", error);
    }

    _prefsStatus(text, error = false) {
      const box = this.shadowRoot.querySelector(".prefs-status");
      box.hidden = !text;
      box.textContent = text;
      box.classList.toggle("error", error);
    }

    _announce(text) {
      this._live.textContent = text;
    }

    _reportError(error) {
      if (!error || error.name === "AbortError") return;
      this._status(this._failureText(error, "loadFailed"), true);
    }

    _setStreamState(state, extra = {}) {
      this._streamState = state;
      this.dataset.stream = state;
      this._emit("stream", { state, ...extra });
    }

    _emit(name, detail, { cancelable = false } = {}) {
      return this.dispatchEvent(new CustomEvent(`notify-inbox:${name}`, {
        detail, bubbles: true, composed: true, cancelable }));
    }
  }

  window.customElements.define("notify-inbox", NotifyInbox);
})();
