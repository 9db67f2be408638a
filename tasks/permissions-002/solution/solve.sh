#!/bin/bash
chmod 755 /app/pebble/fancy_magnet.sh
chmod 444 /app/pebble/humble_crow.txt
