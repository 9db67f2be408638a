#!/bin/bash
grep -c 'ERROR' /app/logs/planet.log > /app/count.txt
