#!/bin/bash
grep -c 'ERROR' /app/logs/swan.log > /app/count.txt
