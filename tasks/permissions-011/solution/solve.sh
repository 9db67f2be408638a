#!/bin/bash
chmod 664 /app/jasper/lively_wolf.txt
chmod 755 /app/jasper/solar_jasper.sh
chmod 600 /app/jasper/calm_quill.key
