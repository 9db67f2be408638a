#!/bin/bash
sed -n '25,31p' /app/sage/proud_reef.txt > /app/goblet_excerpt.txt
