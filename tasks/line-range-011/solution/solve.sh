#!/bin/bash
sed -n '5,6p' /app/hollow/rustic_jungle.txt > /app/pebble_excerpt.txt
