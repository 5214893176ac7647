// Unit tests of the extension's shared logic (assets/gnome/core.js) under
// node, with GNOME Shell's objects faked: the part the GNOME 45+ variant
// shares with the 43 one that the headless gnome-shell 43 runs for real.
// Usage: node core_test.js CORE_JS. Exits non-zero on the first failure.
'use strict';
const fs = require('fs');
const assert = require('assert');

const source = fs.readFileSync(process.argv[2], 'utf8');
const core = new Function(`${source}\nreturn {CoworkDesktop, exeAllowed, allowedPaths, sidebarRect, promptRect, describe};`)();

// --- fakes ---------------------------------------------------------------------
class Emitter {
    constructor() { this._handlers = new Map(); this._next = 1; }
    connect(name, fn) { const id = this._next++; this._handlers.set(id, [name, fn]); return id; }
    disconnect(id) { this._handlers.delete(id); }
    emit(name, ...args) { for (const [n, fn] of [...this._handlers.values()]) if (n === name) fn(this, ...args); }
    count() { return this._handlers.size; }
}
let nextId = 100;
class Window extends Emitter {
    constructor(title, pid, wmClass) {
        super();
        Object.assign(this, {title, pid, wmClass, id: nextId++, fullscreen: false, above: false, sticky: false, rect: null, activated: 0});
    }
    get_title() { return this.title; }
    get_wm_class() { return this.wmClass; }
    get_gtk_application_id() { return null; }
    get_sandboxed_app_id() { return null; }
    get_pid() { return this.pid; }
    get_id() { return this.id; }
    is_fullscreen() { return this.fullscreen; }
    is_skip_taskbar() { return false; }
    get_window_type() { return 0; }
    get_maximized() { return 0; }
    get_work_area_current_monitor() { return {x: 0, y: 32, width: 1280, height: 688}; }
    get_compositor_private() { return {}; }
    make_above() { this.above = true; }
    stick() { this.sticky = true; }
    move_resize_frame(_user, x, y, width, height) { this.rect = {x, y, width, height}; }
    activate() { this.activated++; }
    setTitle(title) { this.title = title; this.emit('notify::title'); }
}
const calls = [];
const signals = [];
// Files by identity (device:inode): /proc/PID/exe follows to the running file.
const files = {'/usr/bin/cowork': '8:100', '/opt/cowork/cowork': '8:200', '/usr/bin/python3': '8:300', '/tmp/copy-of-cowork': '8:400',
    '/proc/4242/exe': '8:100', '/proc/5151/exe': '8:300', '/proc/6161/exe': '8:400'};
const pids = {':1.10': 4242, ':1.20': 5151, ':1.30': 6161};
let clipboardReads = 0;
const display = Object.assign(new Emitter(), {focus_window: null});
const selection = new Emitter();
display.get_selection = () => selection;
let windows = [];
const deps = {
    Gio: {
        DBusExportedObject: {wrapJSObject: () => ({export() {}, unexport() {}})},
        File: {
            new_for_path: path => ({
                query_info: () => {
                    if (!files[path])
                        throw new Error(`no such file ${path}`);
                    const [dev, ino] = files[path].split(':').map(Number);
                    return {get_attribute_uint32: () => dev, get_attribute_uint64: () => ino};
                },
            }),
        },
        FileQueryInfoFlags: {NONE: 0},
        DBus: {
            session: {
                emit_signal(dest, path, iface, name) {
                    signals.push({dest, path, iface, name});
                },
                call(dest, path, iface, method, variant, _type, _flags, _timeout, _cancel, cb) {
                    if (method === 'GetConnectionUnixProcessID') {
                        const pid = pids[variant.value[0]] || 0;
                        cb({call_finish: () => ({deep_unpack: () => [pid]})}, null);
                        return;
                    }
                    calls.push({dest, path, iface, method, args: variant.value});
                    cb({call_finish: () => null}, null);
                },
            },
        },
        DBusCallFlags: {NONE: 0, NO_AUTO_START: 1},
        BusType: {SESSION: 1},
        BusNameWatcherFlags: {NONE: 0},
        bus_watch_name: () => 7,
        bus_unwatch_name() {},
    },
    GLib: {
        Variant: class { constructor(signature, value) { this.signature = signature; this.value = value; } },
        VariantType: class {},
        file_get_contents: () => [true, Buffer.from('# comment\n/usr/bin/cowork\n/opt/cowork/cowork\n')],
        build_filenamev: parts => parts.join('/'),
    },
    Meta: {SelectionType: {SELECTION_PRIMARY: 0, SELECTION_CLIPBOARD: 1}, WindowType: {NORMAL: 0}, MaximizeFlags: {BOTH: 3}},
    St: {ClipboardType: {CLIPBOARD: 1}, Clipboard: {get_default: () => ({get_text: (_t, cb) => { clipboardReads++; cb(null, 'copied text'); }})}},
    global: {display, get_window_actors: () => windows.map(w => ({meta_window: w})), get_current_time: () => 1},
};
function invocation(sender) {
    const inv = {sender, returned: undefined, error: undefined};
    inv.get_sender = () => sender;
    inv.return_value = v => { inv.returned = v; };
    inv.return_dbus_error = (name, text) => { inv.error = {name, text}; };
    return inv;
}
function pushes(method, dest) {
    return calls.filter(c => c.method === method && (dest === undefined || c.dest === dest));
}

// --- the tests -------------------------------------------------------------------
const t = (name, fn) => { calls.length = 0; fn(); console.log(`ok - ${name}`); };

t('programs are allowed by the running file\'s identity, not by a name that reads the same', () => {
    const allowed = '/usr/bin/cowork\n# /tmp/evil\nrelative/path\n';
    assert.deepStrictEqual(core.allowedPaths(allowed), ['/usr/bin/cowork']);
    const idOf = path => files[path] || null;
    assert.ok(core.exeAllowed('8:100', allowed, idOf));
    for (const id of ['8:300', '8:400', null])
        assert.ok(!core.exeAllowed(id, allowed, idOf), String(id));
    assert.ok(!core.exeAllowed('8:100', '', idOf), 'nothing allowed: nobody answered');
});

t('the sidebar docks right at full height and the prompt sits high in the middle', () => {
    const area = {x: 0, y: 32, width: 1280, height: 688};
    assert.deepStrictEqual(core.sidebarRect(area, 380), {x: 900, y: 32, width: 380, height: 688});
    assert.deepStrictEqual(core.sidebarRect({x: 1920, y: 0, width: 300, height: 1080}, 380).x, 1920);
    assert.deepStrictEqual(core.promptRect(area, 560, 64), {x: 360, y: 32 + 208, width: 560, height: 64});
});

const desktop = new core.CoworkDesktop(deps, '/ext');
const alpha = new Window('Alpha', 11, 'alpha-app');
const beta = new Window('Beta', 12, 'beta-app');
const sidebar = new Window('cowork', 4242, 'cowork');
windows = [alpha, beta, sidebar];
display.focus_window = alpha;
desktop.enable();
assert.deepStrictEqual(signals, [{dest: null, path: '/org/cowork/Desktop', iface: 'org.cowork.Desktop1', name: 'Ready'}], 'enabling says so, for subscribers to come back');

t('a stranger gets nothing: no subscription, no window, no list, no placement; nor does a copy of cowork', () => {
    for (const sender of [':1.20', ':1.30'])
    for (const [method, args] of [['SubscribeAsync', [['focus', 'clipboard']]], ['FocusedAsync', []], ['ListWindowsAsync', []], ['PlaceAsync', ['sidebar', 'Alpha', 380, 0]], ['ActivateAsync', [String(alpha.id)]]]) {
        const inv = invocation(sender);
        desktop[method](args, inv);
        assert.strictEqual(inv.error && inv.error.name, 'org.cowork.Desktop1.Error.NotCowork', method);
        assert.strictEqual(inv.returned, undefined, method);
    }
    display.emit('notify::focus-window');
    assert.strictEqual(calls.length, 0, 'nothing pushed to anyone');
    assert.strictEqual(alpha.activated, 0);
    assert.strictEqual(alpha.rect, null);
});

t('cowork subscribes and is told the focused window at once, by a call to its own name', () => {
    const inv = invocation(':1.10');
    desktop.SubscribeAsync([['focus']], inv);
    assert.deepStrictEqual(inv.returned.value, ['1']);
    const told = pushes('Focused');
    assert.strictEqual(told.length, 1);
    assert.deepStrictEqual(told[0], {dest: ':1.10', path: '/org/cowork/Desktop', iface: 'org.cowork.DesktopEvents1', method: 'Focused',
        args: ['Alpha', 'alpha-app', '', '', 11, false, String(alpha.id)]});
});

t('focus, title and fullscreen changes of the focused window are pushed; the unfocused one is not', () => {
    display.focus_window = beta;
    display.emit('notify::focus-window');
    beta.setTitle('Beta, edited');
    beta.fullscreen = true;
    beta.emit('notify::fullscreen');
    alpha.setTitle('Alpha renamed');
    const told = pushes('Focused').map(c => [c.args[0], c.args[5]]);
    assert.deepStrictEqual(told, [['Beta', false], ['Beta, edited', false], ['Beta, edited', true]]);
    assert.strictEqual(alpha.count(), 0, 'the window that lost the focus is not watched');
    display.focus_window = null;
    display.emit('notify::focus-window');
    assert.deepStrictEqual(pushes('Focused').pop().args, ['', '', '', '', 0, false, ''], 'nothing focused is said');
});

t('the clipboard is read and pushed only while a subscriber asks for it, and only to it', () => {
    selection.emit('owner-changed', 1);
    assert.strictEqual(clipboardReads, 0, 'nobody asked: the clipboard is not even read');
    const clip = invocation(':1.10');
    desktop.SubscribeAsync([['focus', 'clipboard']], clip);
    calls.length = 0;
    selection.emit('owner-changed', 0);
    assert.strictEqual(clipboardReads, 0, 'the primary selection is not the clipboard');
    selection.emit('owner-changed', 1);
    assert.deepStrictEqual(pushes('Clipboard', ':1.10').map(c => c.args), [['copied text']]);
    desktop.SubscribeAsync([['focus']], invocation(':1.10'));
    calls.length = 0;
    selection.emit('owner-changed', 1);
    assert.strictEqual(pushes('Clipboard').length, 0, 'stream off: nothing pushed');
});

t('placement touches only the caller\'s own window of that title', () => {
    const other = invocation(':1.10');
    desktop.PlaceAsync(['sidebar', 'Alpha renamed', 380, 0], other);
    assert.deepStrictEqual(other.returned.value, [false], 'another program\'s window is not cowork\'s to place');
    assert.strictEqual(alpha.rect, null);
    const own = invocation(':1.10');
    desktop.PlaceAsync(['sidebar', 'cowork', 380, 0], own);
    assert.deepStrictEqual(own.returned.value, [true]);
    assert.ok(sidebar.above && sidebar.sticky);
    assert.deepStrictEqual(sidebar.rect, {x: 900, y: 32, width: 380, height: 688});
    sidebar.rect = null;
    display.emit('workareas-changed');
    assert.deepStrictEqual(sidebar.rect, {x: 900, y: 32, width: 380, height: 688}, 'a changed work area places it again');
    // The quick prompt is focused when cowork asks, never again by a work-area change.
    const prompt = new Window('cowork quick prompt', 4242, 'cowork');
    windows.push(prompt);
    desktop.PlaceAsync([['prompt', 'cowork quick prompt', 560, 64]].flat(), invocation(':1.10'));
    assert.strictEqual(prompt.activated, 1);
    // Mutter places a window itself as it first shows it, after an early ask: placed again then.
    prompt.rect = {x: 79, y: 44, width: 560, height: 64};
    prompt.emit('shown');
    assert.deepStrictEqual(prompt.rect, {x: 360, y: 240, width: 560, height: 64}, 'centred once shown');
    assert.strictEqual(prompt.activated, 1, 'showing it focuses nothing more');
    display.emit('workareas-changed');
    assert.strictEqual(prompt.activated, 1, 'no focus stolen');
    // A closed window is forgotten.
    prompt.emit('unmanaged');
    sidebar.emit('unmanaged');
    sidebar.rect = null;
    display.emit('workareas-changed');
    assert.strictEqual(sidebar.rect, null);
});

t('disabling tells subscribers nothing is known any more, then disconnects everything', () => {
    desktop.SubscribeAsync([['focus']], invocation(':1.10'));
    calls.length = 0;
    desktop.disable();
    assert.deepStrictEqual(pushes('Focused').map(c => c.args), [['', '', '', '', 0, false, '']]);
    assert.strictEqual(display.count() + selection.count() + alpha.count() + sidebar.count(), 0, 'no handler left behind');
});

t('unsubscribing stops the pushes', () => {
    desktop.enable();
    desktop.SubscribeAsync([['focus']], invocation(':1.10'));
    desktop.UnsubscribeAsync([], invocation(':1.10'));
    calls.length = 0;
    display.focus_window = alpha;
    display.emit('notify::focus-window');
    assert.strictEqual(calls.length, 0);
    desktop.disable();
});
