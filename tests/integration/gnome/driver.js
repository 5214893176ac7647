// A test-only GNOME Shell extension (GNOME 43, legacy imports): it lets the
// test drive the shell (focus a window, make it fullscreen, set the
// clipboard, read where windows are) by evaluating JavaScript inside it.
// It is installed only in a test's temporary home, never by cowork.
/* exported init */
const {Gio} = imports.gi;

const XML = `<node><interface name="org.cowork.TestDriver">
  <method name="Eval"><arg type="s" name="code" direction="in"/><arg type="s" name="json" direction="out"/></method>
</interface></node>`;

class Driver {
    Eval(code) {
        // eslint-disable-next-line no-eval
        const result = eval(code);
        return JSON.stringify(result === undefined ? null : result);
    }
}

class DriverExtension {
    enable() {
        this._object = Gio.DBusExportedObject.wrapJSObject(XML, new Driver());
        this._object.export(Gio.DBus.session, '/org/cowork/TestDriver');
    }

    disable() {
        this._object.unexport();
    }
}

function init() {
    return new DriverExtension();
}
