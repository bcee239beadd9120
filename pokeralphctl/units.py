"""The service manager files, as templates (the copies in ``systemd/`` and ``launchd/`` at
the top of the repository are these, rendered with the placeholders kept; a test checks).

``@POKERALPHD@`` is the absolute path of the installed ``pokeralphd``; ``@HOME@`` the home
directory (launchd does not expand ``~``).
"""

from __future__ import annotations

SERVICE = """\
# pokeralphd as a systemd user service. Install with `pokeralphctl service install`,
# which fills in the path of pokeralphd, then:
#   systemctl --user daemon-reload && systemctl --user enable --now pokeralphd.socket
# With the socket unit, the first client starts the daemon (socket activation).
[Unit]
Description=pokeralph daemon: coding agents in Ralph loops over your repositories
After=default.target

[Service]
Type=notify
NotifyAccess=main
ExecStart=@POKERALPHD@
Restart=on-failure
RestartSec=2
# SIGTERM to pokeralphd alone: its own shutdown ends the agents' process groups and
# leaves running battles paused; whatever is left is killed when TimeoutStopSec runs out.
KillMode=mixed
TimeoutStopSec=30
WatchdogSec=60
UMask=0077
Environment=PYTHONUNBUFFERED=1

[Install]
WantedBy=default.target
"""

SOCKET = """\
# The socket of pokeralphd, held by systemd: the first client to connect starts the daemon.
[Unit]
Description=pokeralph daemon socket

[Socket]
ListenStream=%t/pokeralph/pokeralphd.sock
# systemd's defaults are 0666 and 0755: keep the socket private to this user.
SocketMode=0600
DirectoryMode=0700
FileDescriptorName=pokeralphd

[Install]
WantedBy=sockets.target
"""

LABEL = "com.pokeralph.pokeralphd"

PLIST = """\
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- pokeralphd as a launchd LaunchAgent. Install with `pokeralphctl service install`. -->
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>com.pokeralph.pokeralphd</string>
  <key>ProgramArguments</key>
  <array>
    <string>@POKERALPHD@</string>
  </array>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <dict>
    <key>SuccessfulExit</key>
    <false/>
  </dict>
  <key>ProcessType</key>
  <string>Background</string>
  <key>EnvironmentVariables</key>
  <dict>
    <key>PYTHONUNBUFFERED</key>
    <string>1</string>
  </dict>
  <key>StandardOutPath</key>
  <string>@HOME@/Library/Logs/pokeralph/pokeralphd.log</string>
  <key>StandardErrorPath</key>
  <string>@HOME@/Library/Logs/pokeralph/pokeralphd.log</string>
</dict>
</plist>
"""


def render(template: str, pokeralphd: str, home: str) -> str:
    return template.replace("@POKERALPHD@", pokeralphd).replace("@HOME@", home)
