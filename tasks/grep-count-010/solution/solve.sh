#!/bin/bash
grep -c 'ERROR' /app/logs/planet.log > /app/raven_count.txt
