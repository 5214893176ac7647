// cowork's GNOME Shell extension, GNOME 45 and later (ES modules). The shared
// part (core.js) is written in where the marker below is when cowork installs it.
import Gio from 'gi://Gio';
import GLib from 'gi://GLib';
import Meta from 'gi://Meta';
import Shell from 'gi://Shell';
import St from 'gi://St';
import {Extension} from 'resource:///org/gnome/shell/extensions/extension.js';

// @COWORK_CORE@

export default class CoworkExtension extends Extension {
    enable() {
        this._desktop = new CoworkDesktop({Gio, GLib, Meta, Shell, St, global}, this.path);
        this._desktop.enable();
    }

    disable() {
        this._desktop.disable();
        this._desktop = null;
    }
}
