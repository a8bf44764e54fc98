#!/bin/sh
# SwiftBar / xbar plugin: copy to your SwiftBar plugin folder and make it executable.
# The file name sets the refresh interval (30s). memd prints the menu-bar line, ---, then
# the detail lines of the dropdown.
# <swiftbar.hideAbout>true</swiftbar.hideAbout>
# <swiftbar.hideRunInTerminal>true</swiftbar.hideRunInTerminal>
PATH="$HOME/go/bin:/opt/homebrew/bin:/usr/local/bin:$PATH"
memd status --format swiftbar
echo "Open status page | href=http://127.0.0.1:47100/"
