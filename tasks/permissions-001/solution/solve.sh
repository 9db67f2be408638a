#!/bin/bash
chmod 400 /app/cabin/silver_island.key
chmod 755 /app/cabin/sleepy_jasper.sh
chmod 640 /app/cabin/noble_clover.txt
