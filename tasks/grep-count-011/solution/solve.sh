#!/bin/bash
grep -c 'shell' /app/logs/cactus.log > /app/badge_count.txt
