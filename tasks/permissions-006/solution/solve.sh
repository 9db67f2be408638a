#!/bin/bash
chmod 600 /app/olive/calm_spruce.key
chmod 444 /app/olive/rapid_forest.txt
chmod 700 /app/olive/gentle_coral.sh
