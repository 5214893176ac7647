// cowork's GNOME Shell extension, the part both variants share (GNOME 43–44
// `imports`, GNOME 45+ ESM: each wraps this file, see extension-43.js and
// extension-45.js; the installer writes the right one as extension.js).
//
// Mutter tells ordinary apps nothing about other windows (Introspect is
// refused), so this extension does it for cowork, and only for cowork: it
// serves org.cowork.Desktop1 at /org/cowork/Desktop on the session bus, and
// answers a caller only when the caller's executable is the very file (same
// device and inode) of one the user installed the extension for (the
// `allowed-executables` file beside this one). That keeps ordinary apps out;
// it is no wall against a hostile program of the same user, which can read
// cowork's memory anyway. A caller
// that subscribes is told, by a call to its own unique name (never a
// broadcast signal), which window has the focus, again whenever the focus
// moves or the focused window's title or fullscreen state changes, and, while
// it asks for the clipboard, the text each time the clipboard changes owner.
// Signals only: nothing polls. For the screen-text stream it reads the pixels
// of the focused window alone (Shell.Screenshot of that window's own actor:
// no other window is in the picture), and only while that window is still
// the one cowork judged (its title and pid): otherwise nothing is read. It also lists and activates windows for the
// agent and keeps cowork's own sidebar above, on every workspace and docked
// right in the work area.
//
// `deps` carries what the wrapper imported: Gio, GLib, Meta, Shell, St, global.

const COWORK_VERSION = '1';
const COWORK_PATH = '/org/cowork/Desktop';
const COWORK_EVENTS = 'org.cowork.DesktopEvents1';
const COWORK_XML = `<node>
  <interface name="org.cowork.Desktop1">
    <method name="Subscribe">
      <arg type="as" name="streams" direction="in"/>
      <arg type="s" name="version" direction="out"/>
    </method>
    <method name="Unsubscribe"/>
    <method name="Focused">
      <arg type="(ssssubs)" name="window" direction="out"/>
    </method>
    <method name="ListWindows">
      <arg type="a(ssssubbs)" name="windows" direction="out"/>
    </method>
    <method name="Activate">
      <arg type="s" name="id" direction="in"/>
      <arg type="b" name="done" direction="out"/>
    </method>
    <method name="ReadFocused">
      <arg type="s" name="title" direction="in"/>
      <arg type="u" name="pid" direction="in"/>
      <arg type="ay" name="png" direction="out"/>
    </method>
    <method name="Place">
      <arg type="s" name="kind" direction="in"/>
      <arg type="s" name="title" direction="in"/>
      <arg type="i" name="width" direction="in"/>
      <arg type="i" name="height" direction="in"/>
      <arg type="b" name="placed" direction="out"/>
    </method>
    <property name="Version" type="s" access="read"/>
    <signal name="Ready"/>
  </interface>
</node>`;

// What one window is to cowork: [title, wm_class, app_id, sandboxed_app_id, pid, id].
function describe(window) {
    if (!window)
        return ['', '', '', '', 0, ''];
    return [
        String(window.get_title() || ''),
        String(window.get_wm_class() || ''),
        String(window.get_gtk_application_id() || ''),
        String(window.get_sandboxed_app_id() || ''),
        Math.max(0, window.get_pid() || 0),
        String(window.get_id()),
    ];
}

// The programs `allowed` names (one absolute path a line, # comments).
function allowedPaths(allowed) {
    return allowed.split('\n').map(line => line.trim()).filter(line => line.startsWith('/'));
}

// Whether the file `exeId` identifies (device:inode of /proc/PID/exe, which
// follows to the running file itself) is one of the `allowed` programs, by
// the same identity: a path that merely reads the same (another mount
// namespace, a copy, a replaced file) is not.
function exeAllowed(exeId, allowed, idOf) {
    return exeId !== null && allowedPaths(allowed).some(path => idOf(path) === exeId);
}

// Where cowork's sidebar goes in a work area: the right edge, full height.
function sidebarRect(area, width) {
    const w = Math.max(200, Math.min(width, area.width));
    return {x: area.x + area.width - w, y: area.y, width: w, height: area.height};
}

// Where the quick prompt goes: centred, a third of the way down.
function promptRect(area, width, height) {
    const w = Math.min(width, area.width);
    const h = Math.min(height, area.height);
    return {x: area.x + Math.round((area.width - w) / 2), y: area.y + Math.round((area.height - h) / 3), width: w, height: h};
}

class CoworkDesktop {
    constructor(deps, dir) {
        this._deps = deps;
        this._dir = dir;
        // unique name -> {streams: Set, watch: id}
        this._subscribers = new Map();
        this._signals = [];
        this._windowSignals = [];
        this._placed = new Map();
        // The placed windows' own `unmanaged` handlers (kept across focus changes).
        this._placedSignals = [];
        this._dbus = null;
    }

    enable() {
        const {Gio, global} = this._deps;
        this._dbus = Gio.DBusExportedObject.wrapJSObject(COWORK_XML, this);
        this._dbus.export(Gio.DBus.session, COWORK_PATH);
        // Whoever subscribed before (the extension was disabled and enabled again) subscribes anew.
        Gio.DBus.session.emit_signal(null, COWORK_PATH, 'org.cowork.Desktop1', 'Ready', null);
        const display = global.display;
        this._signals.push([display, display.connect('notify::focus-window', () => this._focusMoved())]);
        const selection = display.get_selection();
        this._signals.push([selection, selection.connect('owner-changed', (_s, type) => this._clipboardChanged(type))]);
        this._signals.push([display, display.connect('workareas-changed', () => this._replace())]);
        this._focusMoved();
    }

    disable() {
        const {Gio} = this._deps;
        // Nothing is known from now on: said, so no window stays "focused" in cowork.
        this._tellAll('focus', 'Focused', '(ssssubs)', describe(null).slice(0, 4).concat([0, false, '']));
        for (const [object, id] of this._signals)
            object.disconnect(id);
        this._signals = [];
        this._unwatchWindow();
        for (const [window, id] of this._placedSignals) {
            try {
                window.disconnect(id);
            } catch (e) {
                // Already gone.
            }
        }
        this._placedSignals = [];
        for (const subscriber of this._subscribers.values())
            Gio.bus_unwatch_name(subscriber.watch);
        this._subscribers.clear();
        this._placed.clear();
        if (this._dbus) {
            this._dbus.unexport();
            this._dbus = null;
        }
    }

    get Version() {
        return COWORK_VERSION;
    }

    // --- callers -----------------------------------------------------------

    // A file's identity (device:inode, following links), null when it cannot be read.
    _fileId(path) {
        const {Gio} = this._deps;
        try {
            const info = Gio.File.new_for_path(path).query_info('unix::device,unix::inode', Gio.FileQueryInfoFlags.NONE, null);
            return `${info.get_attribute_uint32('unix::device')}:${info.get_attribute_uint64('unix::inode')}`;
        } catch (e) {
            return null;
        }
    }

    // Runs `answer(sender, pid)` when the caller is cowork, else refuses the call.
    _fromCowork(invocation, answer) {
        const {Gio, GLib} = this._deps;
        const sender = invocation.get_sender();
        Gio.DBus.session.call('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'GetConnectionUnixProcessID',
            new GLib.Variant('(s)', [sender]), new GLib.VariantType('(u)'), Gio.DBusCallFlags.NONE, -1, null, (conn, result) => {
                // Disabled meanwhile: this instance answers nothing more.
                if (!this._dbus) {
                    invocation.return_dbus_error('org.cowork.Desktop1.Error.Failed', 'the extension is being disabled');
                    return;
                }
                let pid = 0;
                let exeId = null;
                let allowed = '';
                try {
                    pid = conn.call_finish(result).deep_unpack()[0];
                    exeId = this._fileId(`/proc/${pid}/exe`);
                    const [, bytes] = GLib.file_get_contents(GLib.build_filenamev([this._dir, 'allowed-executables']));
                    allowed = new TextDecoder().decode(bytes);
                } catch (e) {
                    // Any failure refuses the call below.
                }
                if (!exeAllowed(exeId, allowed, path => this._fileId(path))) {
                    invocation.return_dbus_error('org.cowork.Desktop1.Error.NotCowork',
                        `this extension answers cowork only; process ${pid} is not one of the programs it was installed for`);
                    return;
                }
                try {
                    answer(sender, pid);
                } catch (e) {
                    invocation.return_dbus_error('org.cowork.Desktop1.Error.Failed', String(e));
                }
            });
    }

    SubscribeAsync([streams], invocation) {
        this._fromCowork(invocation, sender => {
            const {Gio, GLib} = this._deps;
            let subscriber = this._subscribers.get(sender);
            if (!subscriber) {
                const watch = Gio.bus_watch_name(Gio.BusType.SESSION, sender, Gio.BusNameWatcherFlags.NONE, null,
                    () => this._drop(sender));
                subscriber = {streams: new Set(), watch};
                this._subscribers.set(sender, subscriber);
            }
            subscriber.streams = new Set(streams);
            invocation.return_value(new GLib.Variant('(s)', [COWORK_VERSION]));
            if (subscriber.streams.has('focus'))
                this._tell(sender, 'Focused', '(ssssubs)', this._focusedTuple());
        });
    }

    UnsubscribeAsync(_args, invocation) {
        this._drop(invocation.get_sender());
        invocation.return_value(null);
    }

    FocusedAsync(_args, invocation) {
        this._fromCowork(invocation, () => {
            const {GLib} = this._deps;
            invocation.return_value(new GLib.Variant('((ssssubs))', [this._focusedTuple()]));
        });
    }

    ListWindowsAsync(_args, invocation) {
        this._fromCowork(invocation, () => {
            const {GLib, global} = this._deps;
            const focus = global.display.focus_window;
            const windows = this._windows().map(window => {
                const [title, wmClass, appId, sandboxed, pid, id] = describe(window);
                return [title, wmClass, appId, sandboxed, pid, window === focus, window.is_fullscreen(), id];
            });
            invocation.return_value(new GLib.Variant('(a(ssssubbs))', [windows]));
        });
    }

    ActivateAsync([id], invocation) {
        this._fromCowork(invocation, () => {
            const {GLib, global} = this._deps;
            const window = this._windows().find(w => String(w.get_id()) === id);
            if (window)
                window.activate(global.get_current_time());
            invocation.return_value(new GLib.Variant('(b)', [Boolean(window)]));
        });
    }

    // The focused window's pixels as PNG, if it is still the window cowork judged
    // (this title and pid); otherwise an error, and nothing is read.
    ReadFocusedAsync([title, pid], invocation) {
        this._fromCowork(invocation, () => {
            const {Gio, GLib, Shell, global} = this._deps;
            const window = global.display.focus_window;
            if (!window || window.get_title() !== title || window.get_pid() !== pid) {
                invocation.return_dbus_error('org.cowork.Desktop1.Error.Moved', 'the focus moved before the window was read: nothing was read');
                return;
            }
            const stream = Gio.MemoryOutputStream.new_resizable();
            new Shell.Screenshot().screenshot_window(false, false, stream, (shooter, result) => {
                try {
                    shooter.screenshot_window_finish(result);
                    stream.close(null);
                    const png = stream.steal_as_bytes();
                    invocation.return_value(GLib.Variant.new_tuple([GLib.Variant.new_from_bytes(new GLib.VariantType('ay'), png, true)]));
                } catch (e) {
                    invocation.return_dbus_error('org.cowork.Desktop1.Error.Failed', `the window could not be read: ${e}`);
                }
            });
        });
    }

    // Places one of the caller's own windows (its pid and this title): nobody else's.
    PlaceAsync([kind, title, width, height], invocation) {
        this._fromCowork(invocation, (_sender, pid) => {
            const {GLib} = this._deps;
            const window = this._windows().find(w => w.get_pid() === pid && w.get_title() === title);
            if (window && (kind === 'sidebar' || kind === 'prompt')) {
                if (!this._placed.has(window)) {
                    this._placedSignals.push([window, window.connect('unmanaged', () => this._placed.delete(window))]);
                    // A window asked for before it is first shown is placed by Mutter as it shows:
                    // ours again then (and whenever it shows again), so the last word is cowork's.
                    this._placedSignals.push([window, window.connect('shown', () => this._place(window, false))]);
                }
                this._placed.set(window, {kind, width, height});
                this._place(window, true);
            }
            invocation.return_value(new GLib.Variant('(b)', [Boolean(window)]));
        });
    }

    _drop(sender) {
        const subscriber = this._subscribers.get(sender);
        if (subscriber) {
            this._deps.Gio.bus_unwatch_name(subscriber.watch);
            this._subscribers.delete(sender);
        }
    }

    // --- pushes to subscribers ---------------------------------------------

    _tell(sender, method, signature, tuple) {
        const {Gio, GLib} = this._deps;
        Gio.DBus.session.call(sender, COWORK_PATH, COWORK_EVENTS, method, new GLib.Variant(signature, tuple), null,
            Gio.DBusCallFlags.NO_AUTO_START, 5000, null, (conn, result) => {
                try {
                    conn.call_finish(result);
                } catch (e) {
                    // cowork went away or refused: its name watch drops it.
                }
            });
    }

    _tellAll(stream, method, signature, tuple) {
        for (const [sender, subscriber] of this._subscribers) {
            if (subscriber.streams.has(stream))
                this._tell(sender, method, signature, tuple);
        }
    }

    _focusedTuple() {
        const window = this._deps.global.display.focus_window;
        const [title, wmClass, appId, sandboxed, pid, id] = describe(window);
        return [title, wmClass, appId, sandboxed, pid, Boolean(window) && window.is_fullscreen(), id];
    }

    _focusMoved() {
        this._unwatchWindow();
        const window = this._deps.global.display.focus_window;
        if (window) {
            const again = () => this._tellAll('focus', 'Focused', '(ssssubs)', this._focusedTuple());
            this._windowSignals.push([window, window.connect('notify::title', again)]);
            this._windowSignals.push([window, window.connect('notify::fullscreen', again)]);
            this._windowSignals.push([window, window.connect('unmanaged', () => this._unwatchWindow())]);
        }
        this._tellAll('focus', 'Focused', '(ssssubs)', this._focusedTuple());
    }

    _unwatchWindow() {
        for (const [window, id] of this._windowSignals) {
            try {
                window.disconnect(id);
            } catch (e) {
                // Already gone.
            }
        }
        this._windowSignals = [];
    }

    _clipboardChanged(type) {
        const {Meta, St} = this._deps;
        if (type !== Meta.SelectionType.SELECTION_CLIPBOARD)
            return;
        const wanted = [...this._subscribers.values()].some(s => s.streams.has('clipboard'));
        if (!wanted)
            return;
        St.Clipboard.get_default().get_text(St.ClipboardType.CLIPBOARD, (_clipboard, text) => {
            if (typeof text === 'string' && text.length > 0)
                this._tellAll('clipboard', 'Clipboard', '(s)', [text]);
        });
    }

    // --- windows -----------------------------------------------------------

    _windows() {
        const {Meta, global} = this._deps;
        return global.get_window_actors().map(actor => actor.meta_window)
            .filter(w => w && !w.is_skip_taskbar() && w.get_window_type() === Meta.WindowType.NORMAL);
    }

    // `asked`: cowork asked now (the prompt is focused then, never on a work-area change).
    _place(window, asked) {
        const placed = this._placed.get(window);
        if (!placed)
            return;
        const area = window.get_work_area_current_monitor();
        if (typeof window.get_maximized === 'function' && window.get_maximized())
            window.unmaximize(this._deps.Meta.MaximizeFlags.BOTH);
        window.make_above();
        if (placed.kind === 'sidebar') {
            window.stick();
            const r = sidebarRect(area, placed.width);
            window.move_resize_frame(true, r.x, r.y, r.width, r.height);
        } else {
            const r = promptRect(area, placed.width, placed.height);
            window.move_resize_frame(true, r.x, r.y, r.width, r.height);
            if (asked)
                window.activate(this._deps.global.get_current_time());
        }
    }

    // The work area changed (a panel, a monitor): the sidebar follows it.
    _replace() {
        for (const [window, placed] of [...this._placed]) {
            if (!window.get_compositor_private())
                this._placed.delete(window);
            else if (placed.kind === 'sidebar')
                this._place(window, false);
        }
    }
}
