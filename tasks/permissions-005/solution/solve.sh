#!/bin/bash
chmod 664 /app/lantern/happy_harp.txt
chmod 600 /app/lantern/mellow_castle.key
chmod 755 /app/lantern/vivid_pine.sh
