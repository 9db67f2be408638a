#!/bin/bash
chmod 444 /app/orbit/golden_moss.txt
chmod 755 /app/orbit/amber_quartz.sh
chmod 600 /app/orbit/noble_sandal.key
