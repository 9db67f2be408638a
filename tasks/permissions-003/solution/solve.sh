#!/bin/bash
chmod 750 /app/lotus/swift_crow.sh
chmod 600 /app/lotus/bright_magnet.key
